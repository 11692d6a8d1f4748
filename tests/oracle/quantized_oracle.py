"""Independent check of a checkpoint written by `eaglet quantize` against the dense one it came from.

    quantized_oracle.py --dense DIR --quantized DIR --to int8|int4 [--group 32]

Reads both folders with numpy only (safetensors_np.py) and checks, per the compressed-tensors formats
(/work/shared/docs/target-architectures.md, "pack-quantized"; src/model/quantization.h):
  - config.json: every key but quantization_config unchanged; quantization_config declares compressed-tensors,
    int-quantized int8 per channel or pack-quantized int4 group G, symmetric, static weights, lm_head ignored;
  - every projection of a Llama-family decoder (model.layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj;
    an EAGLE-3 drafter's fc and midlayer.* or layers.N.* projections)
    is stored as int8 `weight` I8 [out, in] + `weight_scale` [out, 1], or int4 `weight_packed` I32 [out, in/8]
    (nibble c % 8 of word c // 8 holds code + 8) + `weight_scale` [out, in/G] + `weight_shape` I32 [2];
    the scale has the dense weight's dtype;
  - each scale is compressed-tensors' minmax symmetric scale absmax / ((2^bits - 1) / 2) (at least fp32 eps),
    rounded to that dtype, and each code is clip(round-half-even(w / stored scale), -2^(bits-1), 2^(bits-1) - 1);
  - dequantized, every weight is within the quantization bound of the original: stored scale / 2, or, for an
    element whose code was clamped, absmax - qmax * scale (plus fp32's rounding of w / scale, |w| * 2^-23);
  - every other tensor is byte for byte the dense one, and there is no tensor besides these.
Prints each failure and `N passed, M failed`; exit status 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

# A target's projections, or an EAGLE-3 drafter's: fc and its layers' (midlayer.* or layers.N.*).
LINEAR = re.compile(r"^((model\.layers\.\d+\.|midlayer\.|layers\.\d+\.)(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)"
                    r"|fc)\.weight$")

passed = 0
failed = 0


def check(ok: bool, what: str) -> None:
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}")


def as_f32(arr: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return st.bf16_bits_to_f32(arr).reshape(arr.shape)
    return arr.astype(np.float32)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return st.round_bf16(x).reshape(x.shape)
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    return x.astype(np.float32)


def unpack_int4(words: np.ndarray, cols: int) -> np.ndarray:
    u = words.astype(np.int64) & 0xFFFFFFFF
    nibbles = [((u >> (4 * i)) & 0xF) - 8 for i in range(8)]
    codes = np.stack(nibbles, axis=-1).reshape(words.shape[0], -1)  # column c = word c // 8, nibble c % 8
    return codes[:, :cols]


def check_config(dense_dir: str, quant_dir: str, bits: int, group: int) -> None:
    dense = json.load(open(os.path.join(dense_dir, "config.json")))
    quant = json.load(open(os.path.join(quant_dir, "config.json")))
    q = quant.pop("quantization_config", None)
    check(quant == dense, "config.json keys other than quantization_config are unchanged")
    check(isinstance(q, dict), "quantization_config is an object")
    if not isinstance(q, dict):
        return
    check(q.get("quant_method") == "compressed-tensors", f"quant_method compressed-tensors, found {q.get('quant_method')}")
    check(q.get("format") == ("pack-quantized" if bits == 4 else "int-quantized"), f"format, found {q.get('format')}")
    check(q.get("quantization_status") == "compressed", "quantization_status compressed")
    check("lm_head" in (q.get("ignore") or []), f"ignore lists lm_head, found {q.get('ignore')}")
    groups = q.get("config_groups") or {}
    check(len(groups) == 1, f"one config group, found {len(groups)}")
    g = next(iter(groups.values()), {})
    check(g.get("targets") == ["Linear"], f"targets [Linear], found {g.get('targets')}")
    w = g.get("weights") or {}
    check(w.get("num_bits") == bits and w.get("type") == "int" and w.get("symmetric") is True
          and w.get("dynamic") is False, f"weights int{bits} symmetric static, found {w}")
    if bits == 4:
        check(w.get("strategy") == "group" and w.get("group_size") == group, f"strategy group {group}, found {w}")
        check(g.get("input_activations") is None, "int4: weight-only (input_activations null)")
    else:
        check(w.get("strategy") == "channel", f"strategy channel, found {w}")
        a = g.get("input_activations") or {}
        check(a.get("dynamic") is True and a.get("num_bits") == 8, f"int8: dynamic int8 activations, found {a}")


def check_linear(name: str, w_raw: np.ndarray, dtype: str, quant: st.TensorDict, bits: int, group: int) -> set:
    module = name[: -len(".weight")]
    w = as_f32(w_raw, dtype)
    rows, cols = w.shape
    per = group if bits == 4 else cols
    qmax = 2 ** (bits - 1) - 1
    used = {module + ".weight_scale"}
    scale_name = module + ".weight_scale"
    if scale_name not in quant:
        check(False, f"{scale_name} missing")
        return used
    check(quant.dtypes[scale_name] == dtype, f"{scale_name} dtype {quant.dtypes[scale_name]}, expected {dtype}")
    scale = as_f32(quant[scale_name], quant.dtypes[scale_name])
    if bits == 8:
        codes_name = module + ".weight"
        used.add(codes_name)
        ok = codes_name in quant and quant.dtypes[codes_name] == "I8" and quant[codes_name].shape == (rows, cols)
        check(ok, f"{codes_name} is I8 [{rows}, {cols}]")
        check(scale.shape == (rows, 1), f"{scale_name} shape {scale.shape}, expected [{rows}, 1]")
        if not ok or scale.shape != (rows, 1):
            return used
        codes = quant[codes_name].astype(np.int64)
    else:
        packed, shape = module + ".weight_packed", module + ".weight_shape"
        used |= {packed, shape}
        ok = packed in quant and quant.dtypes[packed] == "I32" and quant[packed].shape == (rows, cols // 8)
        check(ok, f"{packed} is I32 [{rows}, {cols // 8}]")
        check(shape in quant and quant.dtypes.get(shape) == "I32" and list(quant[shape]) == [rows, cols],
              f"{shape} is I32 [2] = [{rows}, {cols}]")
        check(scale.shape == (rows, cols // group), f"{scale_name} shape {scale.shape}, expected [{rows}, {cols // group}]")
        if not ok or scale.shape != (rows, cols // group):
            return used
        codes = unpack_int4(quant[packed], cols)
    groups = w.reshape(rows, cols // per, per)
    absmax = np.abs(groups).max(axis=2)
    want_scale = round_to(np.maximum(absmax / np.float32((2 ** bits - 1) / 2), np.finfo(np.float32).eps), dtype)
    check(np.array_equal(scale, want_scale),
          f"{scale_name}: {int((scale != want_scale).sum())} scales differ from absmax / {(2 ** bits - 1) / 2} in {dtype}")
    s_full = np.repeat(scale, per, axis=1)
    want_codes = np.clip(np.rint(w / s_full), -qmax - 1, qmax).astype(np.int64)
    check(np.array_equal(codes, want_codes),
          f"{module}: {int((codes != want_codes).sum())} codes differ from round(w / scale)")
    s64 = s_full.astype(np.float64)
    deq = codes.astype(np.float64) * s64
    clamped_bound = np.repeat(absmax.astype(np.float64) - qmax * scale.astype(np.float64), per, axis=1)
    # plus fp32's rounding of w / scale (a quotient just past k + 0.5 may round to it, then to even)
    bound = np.maximum(s64 / 2, clamped_bound) + np.abs(w.astype(np.float64)) * 2.0 ** -23
    err = np.abs(deq - w.astype(np.float64))
    check(bool((err <= bound).all()),
          f"{module}: dequantized error {err.max():.3g} beyond the bound (worst excess {(err - bound).max():.3g})")
    return used


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dense", required=True)
    p.add_argument("--quantized", required=True)
    p.add_argument("--to", choices=["int8", "int4"], required=True)
    p.add_argument("--group", type=int, default=32)
    a = p.parse_args()
    bits = 4 if a.to == "int4" else 8
    check_config(a.dense, a.quantized, bits, a.group)
    dense = st.load_model_dir(a.dense, upcast_bf16=False)
    quant = st.load_model_dir(a.quantized, upcast_bf16=False)
    used = set()
    linears = 0
    for name, arr in dense.items():
        if LINEAR.match(name):
            linears += 1
            check(name not in quant or bits == 8, f"{name}: the dense weight is gone")
            used |= check_linear(name, arr, dense.dtypes[name], quant, bits, a.group)
            continue
        used.add(name)
        check(name in quant and quant.dtypes[name] == dense.dtypes[name] and quant[name].shape == arr.shape
              and quant[name].tobytes() == arr.tobytes(), f"{name} copied byte for byte")
    check(linears > 0, "the dense checkpoint has projections")
    extra = sorted(set(quant) - used)
    check(not extra, f"no tensor besides the expected ones, found {extra[:5]}")
    print(f"{linears} projections; {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
