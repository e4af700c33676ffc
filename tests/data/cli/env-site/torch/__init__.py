"""A stand-in torch for the `env` tests (tests/cli/env-*.test): installed metadata says 2.4.0,
and torch.cuda reports one device. Only what attn_doctor/_env.py asks is here."""


class version:  # noqa: N801 (torch.version)
    cuda = "12.1"


class cuda:  # noqa: N801 (torch.cuda)
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def get_device_name(i):
        return "Stand-in GPU 80GB"

    @staticmethod
    def get_device_capability(i):
        return (9, 0)
