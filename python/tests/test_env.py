"""`python -m attn_doctor env`: the binary's report about this interpreter, or, with no binary,
the Python side alone (exit 3); versions from the distributions' metadata, nothing imported
that is not installed."""
import json
import os
import subprocess
import sys
import unittest

from .support import temp_dir

import attn_doctor  # noqa: E402
from attn_doctor import _binary  # noqa: E402

# Where the package under test lives (the source tree's python/, or the site-packages it was
# installed into): the one folder besides the stand-in site that the tests' Pythons may see.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(attn_doctor.__file__)))


def write_distribution(site, name, version):
    folder = os.path.join(site, f"{name.replace('-', '_')}-{version}.dist-info")
    os.makedirs(folder)
    with open(os.path.join(folder, "METADATA"), "w") as fh:
        fh.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


# The stand-in site is all these tests' Pythons may see: -S leaves out site-packages (a real
# torch or triton installed there would answer instead of the stand-ins' absence); PYTHONPATH
# still counts.
NO_SITE = "-S"


class EnvTest(unittest.TestCase):
    def run_env(self, site, *args, binary=None):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([site, PACKAGE_PARENT])
        env.pop("ATTN_DOCTOR_ENV_PYTHON", None)
        if binary is None:
            env.pop("ATTN_DOCTOR_BINARY", None)
        else:
            env["ATTN_DOCTOR_BINARY"] = binary
        return subprocess.run([sys.executable, NO_SITE, "-m", "attn_doctor", "env", *args], cwd=site, env=env,
                              capture_output=True, text=True, timeout=120)

    def test_versions_from_metadata_without_importing(self):
        with temp_dir() as site:
            write_distribution(site, "transformers", "4.53.1")
            write_distribution(site, "flash_attn_3", "3.0.0b1")
            write_distribution(site, "fla-core", "0.3.2")
            write_distribution(site, "triton", "3.1.0")
            code = ("import json, sys; from attn_doctor import _env; info = _env.collect(); "
                    "print(json.dumps([info['libraries'], sorted(m for m in sys.modules "
                    "if m.split('.')[0] in ('torch', 'transformers', 'triton', 'fla'))]))")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, PACKAGE_PARENT]))
            proc = subprocess.run([sys.executable, NO_SITE, "-c", code], cwd=site, env=env, capture_output=True,
                                  text=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            libraries, imported = json.loads(proc.stdout)
            versions = {lib["name"]: lib["version"] for lib in libraries}
            self.assertEqual(versions["transformers"], "4.53.1")
            self.assertEqual(versions["flash_attn_3"], "3.0.0b1")
            self.assertEqual(versions["flash-linear-attention"], "0.3.2")  # fla-core provides fla
            self.assertEqual(versions["triton"], "3.1.0")
            self.assertIsNone(versions["torch"])
            self.assertEqual(imported, [])  # metadata only: none of them was imported

    def test_without_a_binary_the_python_side_and_exit_3(self):
        with temp_dir() as site:
            write_distribution(site, "transformers", "4.44.0")
            missing = os.path.join(site, "no-such-attn-doctor")
            proc = self.run_env(site, binary=missing)
            self.assertEqual(proc.returncode, 3, proc.stderr)
            self.assertIn(f"binary: not found (ATTN_DOCTOR_BINARY={missing} is not an executable file)", proc.stdout)
            self.assertIn(f"python: {sys.version.split()[0]} ({sys.executable})", proc.stdout)
            self.assertIn("transformers: 4.44.0", proc.stdout)
            self.assertIn("torch: not installed", proc.stdout)
            self.assertIn("extension attn_doctor._native: ", proc.stdout)

    @unittest.skipUnless(_binary.find(), "no attn-doctor binary here")
    def test_the_binary_reports_on_this_interpreter(self):
        binary = _binary.find()
        with temp_dir() as site:
            write_distribution(site, "flash-attn", "2.6.3")
            proc = self.run_env(site, binary=binary)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn(f"binary: {os.path.realpath(binary)}", proc.stdout)
            self.assertIn("commit: ", proc.stdout)
            self.assertIn(f"python: {sys.version.split()[0]} ({sys.executable})", proc.stdout)
            self.assertIn("flash-attn: 2.6.3", proc.stdout)
            proc = self.run_env(site, "--format", "json", binary=binary)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            report = json.loads(proc.stdout)
            self.assertEqual(report["python"]["python"]["executable"], sys.executable)
            self.assertIn("python_extension", report["build"])


if __name__ == "__main__":
    unittest.main()
