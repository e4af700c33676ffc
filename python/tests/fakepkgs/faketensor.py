"""A tensor stand-in for the capture tests: shape, dtype, device and (for small index
tensors only) values. q/k/v are built without values; `host_copies` counts `tolist()`
calls so a test can prove that capture never copied them to the host."""


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, FakeDtype) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


def _flatten(x):
    if isinstance(x, list):
        out = []
        for item in x:
            out.extend(_flatten(item))
        return out
    return [x]


def _shape_of(x):
    shape = []
    while isinstance(x, list):
        shape.append(len(x))
        x = x[0] if x else None
    return tuple(shape)


def _nest(flat, shape):
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


class FakeTensor:
    def __init__(self, values=None, shape=None, dtype="int64", device="cpu", strides=None):
        if values is not None:
            self._flat = _flatten(values) if isinstance(values, list) else [values]
            self.shape = tuple(shape) if shape is not None else _shape_of(values)
        else:
            self._flat = None
            self.shape = tuple(shape)
        self.dtype = FakeDtype(dtype)
        self.device = device
        self._strides = strides
        self._version = 0
        self.host_copies = 0

    def dim(self):
        return len(self.shape)

    def detach(self):
        return self

    def stride(self):
        if self._strides is not None:
            return tuple(self._strides)
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))

    def tolist(self):
        if self._flat is None:
            raise AssertionError("a q/k/v-sized tensor was copied to the host")
        self.host_copies += 1
        return _nest(self._flat, self.shape)

    def item(self):
        assert len(self._flat) == 1
        self.host_copies += 1
        return self._flat[0]

    def transpose(self, a, b):
        shape = list(self.shape)
        shape[a], shape[b] = shape[b], shape[a]
        strides = list(self.stride())
        strides[a], strides[b] = strides[b], strides[a]
        return FakeTensor(shape=shape, dtype=self.dtype.name, device=self.device, strides=strides)
