"""Folder put on PYTHONPATH by `python -m attn_doctor.capture`: its `sitecustomize` installs
the capture in the child process before the user's script runs."""
