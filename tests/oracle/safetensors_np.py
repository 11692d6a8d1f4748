"""Minimal safetensors reader/writer on numpy + json (no `safetensors` package needed).

File format (https://github.com/huggingface/safetensors, "Format" section):
    8 bytes   little-endian u64 N = header length
    N bytes   JSON: {name: {"dtype": str, "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {str: str}}
    rest      byte buffer; offsets are relative to its start; all values little-endian.

BF16 is the upper half of an IEEE float32. `load` upcasts it to float32 (exact); `save` converts float values to
BF16 with round-to-nearest-even (NaN stays NaN), which is what torch's `tensor.to(torch.bfloat16)` does.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

# safetensors dtype name -> numpy storage dtype (little-endian). BF16 is stored as raw uint16 bits.
_STORAGE = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "F8_E4M3": np.dtype("u1"),  # raw codes; deepseek_reference.py decodes them
    "BOOL": np.dtype("?"),
}

# numpy dtype -> default safetensors dtype when `save` is not told otherwise.
_DEFAULT = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int16"): "I16",
    np.dtype("int8"): "I8",
    np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}


class TensorDict(dict):
    """dict name -> np.ndarray, plus `.dtypes` (name -> safetensors dtype as stored) and `.metadata`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dtypes: dict[str, str] = {}
        self.metadata: dict[str, str] = {}


# ---------------------------------------------------------------------------------------------------------------
# bf16 conversions


def f32_to_bf16_bits(x) -> np.ndarray:
    """float array -> uint16 BF16 bit patterns, round-to-nearest-even; NaN -> quiet NaN with the same sign."""
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(f)
    if nan.any():
        rounded = np.where(nan, (u >> 16) | 0x0040, rounded)
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(bits) -> np.ndarray:
    b = np.ascontiguousarray(np.asarray(bits, dtype=np.uint16))
    return (b.astype(np.uint32) << 16).view(np.float32)


def round_bf16(x) -> np.ndarray:
    """float array -> float32 array holding the nearest BF16 values (round-to-nearest-even)."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


# ---------------------------------------------------------------------------------------------------------------
# reading


def read_header(path: str) -> tuple[dict, int]:
    """Returns (header dict incl. '__metadata__' if present, byte offset of the data buffer)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 * 1024 * 1024:
            raise ValueError(f"{path}: header length {n} is implausible")
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n


def load(path: str, upcast_bf16: bool = True, names=None) -> TensorDict:
    """Load every tensor (or only `names`) of one .safetensors file.

    BF16 tensors come back as float32 (exact upcast) unless upcast_bf16=False, in which case the raw uint16 bit
    patterns are returned. `result.dtypes[name]` is the dtype as stored in the file.
    """
    header, base = read_header(path)
    out = TensorDict()
    out.metadata = dict(header.get("__metadata__") or {})
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        buf = f.read()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if names is not None and name not in names:
            continue
        dt = info["dtype"]
        if dt not in _STORAGE:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        shape = tuple(int(s) for s in info["shape"])
        begin, end = (int(v) for v in info["data_offsets"])
        st = _STORAGE[dt]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * st.itemsize or base + end > size or begin > end:
            raise ValueError(f"{path}: tensor {name}: data_offsets {begin},{end} do not match {dt}{list(shape)}")
        arr = np.frombuffer(buf, dtype=st, count=count, offset=base + begin).reshape(shape)
        if dt == "BF16" and upcast_bf16:
            arr = bf16_bits_to_f32(arr).reshape(shape)
        else:
            arr = arr.astype(st.newbyteorder("="), copy=True)
        out[name] = arr
        out.dtypes[name] = dt
    return out


def load_model_dir(model_dir: str, upcast_bf16: bool = True) -> TensorDict:
    """Load a Hugging Face checkpoint directory: model.safetensors, or shards listed by model.safetensors.index.json."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        out = TensorDict()
        by_file: dict[str, list[str]] = {}
        for name, fname in weight_map.items():
            by_file.setdefault(fname, []).append(name)
        for fname in sorted(by_file):
            part = load(os.path.join(model_dir, fname), upcast_bf16=upcast_bf16, names=set(by_file[fname]))
            missing = set(by_file[fname]) - set(part)
            if missing:
                raise ValueError(f"{fname}: index lists tensors the shard lacks: {sorted(missing)[:5]}")
            out.update(part)
            out.dtypes.update(part.dtypes)
            out.metadata.update(part.metadata)
        return out
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        return load(single, upcast_bf16=upcast_bf16)
    raise FileNotFoundError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")


# ---------------------------------------------------------------------------------------------------------------
# writing


def _encode(name: str, value, dtype: str | None) -> tuple[str, tuple, bytes]:
    arr = np.asarray(value)
    if dtype is None:
        if arr.dtype not in _DEFAULT:
            raise ValueError(f"tensor {name}: no default safetensors dtype for numpy {arr.dtype}")
        dtype = _DEFAULT[arr.dtype]
    dtype = dtype.upper()
    if dtype not in _STORAGE:
        raise ValueError(f"tensor {name}: unsupported dtype {dtype}")
    if dtype == "BF16":
        data = f32_to_bf16_bits(arr)
    elif dtype == "BOOL":
        data = arr.astype(np.bool_)
    else:
        st = _STORAGE[dtype]
        if np.issubdtype(st, np.integer) and not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
            if arr.size and not np.all(np.equal(np.mod(arr, 1), 0)):
                raise ValueError(f"tensor {name}: non-integer values for {dtype}")
        data = arr.astype(st)
    return dtype, tuple(int(s) for s in arr.shape), np.ascontiguousarray(data).tobytes()


def save(path: str, tensors: dict, dtypes: dict | None = None, metadata: dict | None = None) -> int:
    """Write `tensors` (name -> array-like) to `path`. `dtypes` maps names to F32/BF16/F16/I64/I32/BOOL/...;
    unlisted names use the numpy dtype (float32 -> F32, int64 -> I64, ...). Returns the total data bytes.
    Tensors are laid out in name order; the header is padded with spaces to a multiple of 8 bytes."""
    dtypes = dtypes or {}
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        dt, shape, data = _encode(name, tensors[name], dtypes.get(name))
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
    return offset


def save_sharded(model_dir: str, tensors: dict, dtypes: dict | None, shards: list[list[str]],
                 metadata: dict | None = None) -> None:
    """Write `tensors` over len(shards) files model-0000k-of-0000n.safetensors (shards[k] lists the names in file
    k) plus model.safetensors.index.json = {"metadata": {"total_size": bytes}, "weight_map": {name: file}}."""
    n = len(shards)
    listed = [name for names in shards for name in names]
    if sorted(listed) != sorted(tensors) or len(set(listed)) != len(listed):
        raise ValueError("shards must partition the tensor names")
    weight_map = {}
    total = 0
    for k, names in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        total += save(os.path.join(model_dir, fname), {nm: tensors[nm] for nm in names},
                      {nm: dt for nm, dt in (dtypes or {}).items() if nm in names}, metadata)
        for nm in names:
            weight_map[nm] = fname
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")


def take_array(tensors, name: str, shape, used: set):
    """tensors[name] as a numpy array of exactly `shape` (KeyError / ValueError naming it otherwise), noted in `used`
    (the oracles' strict accounting)."""
    if name not in tensors:
        raise KeyError(f"checkpoint lacks {name}")
    a = np.asarray(tensors[name])
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name}: shape {list(a.shape)}, expected {list(shape)}")
    used.add(name)
    return a
