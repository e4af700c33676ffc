"""Where the hooks go, and how they are put in and taken out again.

Entry points wrapped (whichever the run has loaded, now or later):

  transformers.modeling_flash_attention_utils._flash_attention_forward   (>= 4.42)
  transformers.integrations.flash_attention.flash_attention_forward      (>= 4.48, 5.x: the
      function the model's attention calls through ALL_ATTENTION_FUNCTIONS; gives the module)
  transformers.models.*: XFlashAttention2._flash_attention_forward        (<= 4.41, records)
                         XFlashAttention2.forward                         (<= 4.47, gives the module)
  flash_attn[.flash_attn_interface].flash_attn_varlen_func / flash_attn_func
  torch.nn.attention.varlen.varlen_attn                                   (torch >= 2.10)
  transformer_engine.pytorch.DotProductAttention.forward                  (qkv_format "thd" calls;
      other formats go straight through: te_thd.te_dpa_call)
  fla.modules[.rotary[.ops]].RotaryEmbedding.forward
  transformers.modeling_utils.PreTrainedModel.__call__ (the model entry: nn.Module.__call__
      wrapped for every model class; it records the attention mask and position ids the
      model's forward received, where a mask is still the user's, for the calls below it)

A function is imported by name into many modules (each 4.42-4.47 model file holds its own
reference to `_flash_attention_forward`; 5.x caches flash_attn's functions in module
globals), so after wrapping a definition every loaded module's attribute that still refers
to the original is re-pointed at the wrapper, and the same happens to each watched module
imported later (a meta-path hook wraps its loader). Everything is recorded and restored in
reverse order by `Patcher.restore`.

The capture and the guard share one set of wrappers: `attach(role, user)` installs them for
the first user and `detach` restores everything when the last one leaves. A wrapper runs
the guard's check before the call (it may raise VarlenError instead of calling the kernel)
and the capture's recording around it, and goes straight to the original when neither is
installed or under torch.compile tracing.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _tensors as T
from . import te_thd

# (module name, attribute, entry kind)
FUNCTION_TARGETS: Tuple[Tuple[str, str, str], ...] = (
    ("transformers.modeling_flash_attention_utils", "_flash_attention_forward", "transformers"),
    ("transformers.integrations.flash_attention", "flash_attention_forward", "module_context"),
    ("flash_attn.flash_attn_interface", "flash_attn_varlen_func", "flash_attn_varlen"),
    ("flash_attn.flash_attn_interface", "flash_attn_func", "flash_attn_dense"),
    ("flash_attn", "flash_attn_varlen_func", "flash_attn_varlen"),
    ("flash_attn", "flash_attn_func", "flash_attn_dense"),
    ("torch.nn.attention.varlen", "varlen_attn", "torch_varlen"),
)
ROTARY_MODULES = ("fla.modules.rotary.ops", "fla.modules.rotary", "fla.modules")
# Transformer Engine's DotProductAttention: where 2.x defines it, where 1.x did, the package
TE_MODULES = ("transformer_engine.pytorch.attention.dot_product_attention.dot_product_attention",
              "transformer_engine.pytorch.attention", "transformer_engine.pytorch")
WATCHED_PREFIXES = ("transformers.models.",)
WATCHED = frozenset([m for m, _, _ in FUNCTION_TARGETS] + list(ROTARY_MODULES) + list(TE_MODULES)
                    + ["transformers.modeling_utils", "transformers.integrations"])

ENTRY_NAMES = {
    "transformers": "transformers._flash_attention_forward",
    "transformers_method": "transformers.FlashAttention2._flash_attention_forward",
    "flash_attn_varlen": "flash_attn.flash_attn_varlen_func",
    "flash_attn_dense": "flash_attn.flash_attn_func",
    "fla_rotary": "fla.RotaryEmbedding.forward",
    "model_entry": "transformers.PreTrainedModel.__call__",
    "torch_varlen": "torch.nn.attention.varlen.varlen_attn",
    "te_dpa": "transformer_engine.pytorch.DotProductAttention.forward",
}

_MARK = "__attn_doctor_original__"

# id(original) -> (original, wrapper), never emptied: references to a wrapper that a library
# kept after a capture ended must find the same wrapper when the next capture starts.
_WRAPPERS: Dict[int, Tuple[Any, Callable]] = {}


def original_of(fn: Any) -> Any:
    return getattr(fn, _MARK, None)


class Patcher:
    """Wraps functions and methods and re-points references; `restore` undoes all of it."""

    def __init__(self, make_wrapper: Callable[[Any, str], Callable]):
        self._make_wrapper = make_wrapper
        self._wrappers: Dict[int, Tuple[Any, Callable]] = {}   # id(original) -> (original, wrapper)
        self._undo: List[Tuple[Any, str, Any, bool]] = []       # (owner, key, old, is_mapping)
        self._patched_classes: set = set()
        self._lock = threading.RLock()

    # -- primitives -----------------------------------------------------------------------

    def _set(self, owner: Any, key: str, value: Any, mapping: bool = False) -> None:
        old = owner[key] if mapping else owner.__dict__.get(key) if isinstance(owner, type) \
            else getattr(owner, key)
        self._undo.append((owner, key, old, mapping))
        if mapping:
            owner[key] = value
        else:
            setattr(owner, key, value)

    def wrapper_for(self, original: Any, kind: str) -> Callable:
        entry = self._wrappers.get(id(original))
        if entry is not None and entry[0] is original:
            return entry[1]
        # One wrapper per original for the life of the process (see _WRAPPERS).
        entry = _WRAPPERS.get(id(original))
        if entry is None or entry[0] is not original:
            wrapper = self._make_wrapper(original, kind)
            try:
                functools.update_wrapper(wrapper, original)
            except Exception:
                pass
            setattr(wrapper, _MARK, original)
            entry = _WRAPPERS[id(original)] = (original, wrapper)
        self._wrappers[id(original)] = entry
        return entry[1]

    def wrap_attribute(self, owner: Any, name: str, kind: str) -> None:
        value = getattr(owner, name, None) if not isinstance(owner, type) else owner.__dict__.get(name)
        if value is None or not callable(value) or original_of(value) is not None:
            return
        self._set(owner, name, self.wrapper_for(value, kind))

    def rebind_module(self, module: Any) -> None:
        """Point every attribute of `module` that holds a wrapped original at its wrapper."""
        try:
            items = list(vars(module).items())
        except TypeError:
            return
        for key, value in items:
            entry = self._wrappers.get(id(value))
            if entry is not None and entry[0] is value:
                self._set(module, key, entry[1])

    def rebind_mapping(self, mapping: Any) -> None:
        if not isinstance(mapping, dict):
            return
        for key, value in list(mapping.items()):
            entry = self._wrappers.get(id(value))
            if entry is not None and entry[0] is value:
                self._set(mapping, key, entry[1], mapping=True)

    def restore(self) -> None:
        with self._lock:
            for owner, key, old, mapping in reversed(self._undo):
                try:
                    if mapping:
                        owner[key] = old
                    elif isinstance(owner, type) and old is None:
                        delattr(owner, key)
                    else:
                        setattr(owner, key, old)
                except Exception:
                    pass
            self._undo.clear()
            self._wrappers.clear()
            self._patched_classes.clear()

    # -- the targets ----------------------------------------------------------------------

    def scan(self) -> None:
        """Wrap every target present in sys.modules and re-point references to it."""
        with self._lock:
            for module_name, attr, kind in FUNCTION_TARGETS:
                module = sys.modules.get(module_name)
                if module is not None:
                    self.wrap_attribute(module, attr, kind)
            for module_name in ROTARY_MODULES:
                module = sys.modules.get(module_name)
                cls = getattr(module, "RotaryEmbedding", None) if module is not None else None
                if isinstance(cls, type) and id(cls) not in self._patched_classes:
                    self._patched_classes.add(id(cls))
                    self.wrap_attribute(cls, "forward", "fla_rotary")
            for module_name in TE_MODULES:
                module = sys.modules.get(module_name)
                cls = getattr(module, "DotProductAttention", None) if module is not None else None
                if isinstance(cls, type) and id(cls) not in self._patched_classes:
                    self._patched_classes.add(id(cls))
                    self.wrap_attribute(cls, "forward", "te_dpa")
            for name, module in list(sys.modules.items()):
                if name.startswith("transformers.models.") and module is not None:
                    self._patch_model_classes(module)
            for name, module in list(sys.modules.items()):
                if module is not None and _may_hold_references(name):
                    self.rebind_module(module)
            self._rebind_attention_registry()
            self._patch_model_entry()

    def _patch_model_entry(self) -> None:
        """The model entry: `PreTrainedModel.__call__` (inherited from nn.Module) wrapped, so
        every model's forward records its inputs on the model stack (`model_inputs`)."""
        module = sys.modules.get("transformers.modeling_utils")
        cls = getattr(module, "PreTrainedModel", None) if module is not None else None
        if not isinstance(cls, type) or id(cls) in self._patched_classes:
            return
        if original_of(cls.__dict__.get("__call__")) is not None:
            return
        base = cls.__dict__.get("__call__")
        if base is None:
            base = next((c.__dict__["__call__"] for c in cls.__mro__[1:] if "__call__" in c.__dict__), None)
        if base is None:
            return
        self._patched_classes.add(id(cls))
        self._set(cls, "__call__", self.wrapper_for(base, "model_entry"))

    def _patch_model_classes(self, module: Any) -> None:
        """<= 4.47: per-model `XFlashAttention2` classes. Their `forward` provides the module
        (config, layer) to the recording below it; <= 4.41 their `_flash_attention_forward`
        method is the conversion entry itself."""
        for cls in list(vars(module).values()):
            if not (isinstance(cls, type) and cls.__name__.endswith("FlashAttention2")
                    and cls.__module__ == module.__name__) or id(cls) in self._patched_classes:
                continue
            self._patched_classes.add(id(cls))
            if "_flash_attention_forward" in cls.__dict__:
                self.wrap_attribute(cls, "_flash_attention_forward", "transformers_method")
            if "forward" in cls.__dict__:
                self.wrap_attribute(cls, "forward", "module_context")

    def _rebind_attention_registry(self) -> None:
        """>= 4.48: models look up `flash_attention_forward` in ALL_ATTENTION_FUNCTIONS."""
        module = sys.modules.get("transformers.modeling_utils")
        registry = getattr(module, "ALL_ATTENTION_FUNCTIONS", None) if module is not None else None
        if registry is None:
            return
        for attr in ("_global_mapping", "_local_mapping"):
            self.rebind_mapping(getattr(registry, attr, None))


def _may_hold_references(name: str) -> bool:
    # Every module may have done `from flash_attn import flash_attn_varlen_func`; scanning
    # all of sys.modules once per watched import is cheap (a dict walk per module).
    return not name.startswith(("attn_doctor", "importlib", "encodings", "_frozen"))


class _LoaderProxy(importlib.abc.Loader):
    """Runs the real loader, then lets the patcher see the freshly executed module."""

    def __init__(self, loader: Any, on_loaded: Callable[[Any], None]):
        self._loader = loader
        self._on_loaded = on_loaded

    def create_module(self, spec):  # noqa: D401 - loader protocol
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._on_loaded(module)
        except Exception as exc:  # a broken hook must never break the user's import
            _warn(f"could not hook {module.__name__}: {exc!r}")

    def __getattr__(self, name):
        return getattr(self._loader, name)


class ImportHook(importlib.abc.MetaPathFinder):
    """Meta-path finder that only decorates the loaders of watched modules."""

    def __init__(self, on_loaded: Callable[[Any], None]):
        self._on_loaded = on_loaded
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if not (fullname in WATCHED or fullname.startswith(WATCHED_PREFIXES)):
            return None
        if getattr(self._busy, "active", False):
            return None
        self._busy.active = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.active = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _LoaderProxy(spec.loader, self._on_loaded)
        return spec


class Users:
    """Who the wrappers serve now: the installed capture and guard, each optional."""
    capture: Any = None
    guard: Any = None


USERS = Users()
_LOCK = threading.RLock()
_patcher: Optional[Patcher] = None
_import_hook: Optional[ImportHook] = None


class _ModelFrame:
    __slots__ = ("model", "attention_mask", "position_ids")

    def __init__(self, model: Any, attention_mask: Any, position_ids: Any):
        self.model, self.attention_mask, self.position_ids = model, attention_mask, position_ids


_MODEL_STACK = threading.local()
_FORWARD_PARAMETERS: Dict[type, Optional[List[str]]] = {}


def _model_stack() -> List[_ModelFrame]:
    stack = getattr(_MODEL_STACK, "stack", None)
    if stack is None:
        stack = _MODEL_STACK.stack = []
    return stack


def _model_frame(model: Any, args: tuple, kwargs: dict) -> _ModelFrame:
    """The inputs a model's forward received: `attention_mask` and `position_ids`, by keyword
    or by their place in the forward's signature (cached per class)."""
    cls = type(model)
    names = _FORWARD_PARAMETERS.get(cls, False)
    if names is False:
        names = None
        try:
            import inspect
            params = list(inspect.signature(cls.forward).parameters.values())
            names = [p.name for p in params[1:] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError, AttributeError):
            pass
        _FORWARD_PARAMETERS[cls] = names

    def get(name: str) -> Any:
        if name in kwargs:
            return kwargs[name]
        if names and name in names:
            i = names.index(name)
            if i < len(args):
                return args[i]
        return None

    return _ModelFrame(model, get("attention_mask"), get("position_ids"))


def model_inputs() -> Optional[_ModelFrame]:
    """The innermost model forward running in this thread whose inputs hold an attention mask
    (the model's own view: what the user or the collator passed), else None."""
    for frame in reversed(_model_stack()):
        if frame.attention_mask is not None:
            return frame
    return None


def _make_wrapper(original: Any, kind: str) -> Callable:
    """The wrapper of one original function. It outlives any one capture or guard on
    purpose: a library may keep a reference to it (transformers 5.x caches flash_attn's
    functions in module globals at first use), so it serves whoever is installed when it is
    called, and goes straight to the original when nobody is."""

    if kind == "model_entry":
        def attn_doctor_model_entry(self, *args, **kwargs):
            if (USERS.capture is None and USERS.guard is None) or T.is_compiling():
                return original(self, *args, **kwargs)
            stack = _model_stack()
            try:
                frame = _model_frame(self, args, kwargs)
            except Exception:  # describing the inputs must never stop the model
                return original(self, *args, **kwargs)
            stack.append(frame)
            try:
                return original(self, *args, **kwargs)
            finally:
                if stack and stack[-1] is frame:
                    stack.pop()
                elif frame in stack:
                    stack.remove(frame)

        return attn_doctor_model_entry

    def attn_doctor_wrapper(*args, **kwargs):
        capture, guard = USERS.capture, USERS.guard
        if (capture is None and guard is None) or T.is_compiling():
            return original(*args, **kwargs)
        if kind == "te_dpa":
            te_thd.next_call()  # the call id every rank's n-th call shares
        frame = capture._begin(kind, original, args, kwargs) if capture is not None else None
        token = None
        try:
            if guard is not None:
                token = guard._enter(kind, original, args, kwargs)
            # the guard with kernels=True runs flash-attn's and torch's varlen calls on
            # attn_doctor.ops (the checked kernels) where they cover the call
            run = guard.kernel_for(kind, original, args, kwargs) if guard is not None and guard.kernels else None
            result = (run or original)(*args, **kwargs)
        except BaseException as exc:
            if guard is not None:
                guard._exit(token)
            if capture is not None:
                capture._end(frame, exc)
            raise
        if guard is not None:
            guard._exit(token)
        if capture is not None:
            capture._end(frame, None)
        return result

    return attn_doctor_wrapper


def attach(role: str, user: Any) -> None:
    """Make `user` the installed capture or guard (`role`); the wrappers go in with the
    first user. Raises RuntimeError when another one holds the role."""
    global _patcher, _import_hook
    with _LOCK:
        current = getattr(USERS, role)
        if current is not None and current is not user:
            raise RuntimeError(f"another attn_doctor {role} is already installed")
        setattr(USERS, role, user)
        if _patcher is None:
            patcher = Patcher(_make_wrapper)
            _patcher = patcher
            _import_hook = ImportHook(lambda module: patcher.scan())
            sys.meta_path.insert(0, _import_hook)
        _patcher.scan()


def detach(role: str, user: Any) -> None:
    """Remove `user` from its role; with nobody left, every wrapper and reference is put back."""
    global _patcher, _import_hook
    with _LOCK:
        if getattr(USERS, role) is user:
            setattr(USERS, role, None)
        if USERS.capture is None and USERS.guard is None and _patcher is not None:
            if _import_hook in sys.meta_path:
                sys.meta_path.remove(_import_hook)
            _patcher.restore()
            _patcher = _import_hook = None


_warned: set = set()


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"attn-doctor: warning: {message}", file=sys.stderr)


__all__ = ["Patcher", "ImportHook", "ENTRY_NAMES", "USERS", "attach", "detach", "original_of", "model_inputs"]
