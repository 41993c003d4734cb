"""A trained OCR recogniser from the rapidocr_onnxruntime wheel, end to end on vtacc and vtasim: character
accuracy on rendered text lines, float against int8 on VTA.

    python examples/rapidocr/run.py [--lines N] [--calibration N] [--seed S] [--others]

Needs rapidocr_onnxruntime (an optional extra, never used by `make demo` or the tests that run without it:
`pip install '.[ocr]'`). Nothing is downloaded: the models are the ONNX files shipped in the installed
package's folder (PP-OCRv4's recogniser, with its character list in the model's ``character`` metadata).

1. Text lines are drawn from a seeded RNG (random letters and digits, numbers, dates, prices, words) and
   rendered black on white with Pillow's bundled font (``ImageFont.load_default``) at a random size, then
   preprocessed as rapidocr does: resized to height 48 (bilinear), scaled to [-1, 1], padded to width 320;
2. onnxruntime runs the float model; its output (per column, a softmax over the characters) is decoded
   CTC-greedy; character accuracy is 1 - (edit distance / length), over all lines;
3. ``vtacc`` imports the model (calibrated on other rendered lines), compiles it and writes a network
   file (timed); ``vtasim`` runs it on the same lines, float in and float out; its int8 outputs are
   checked bit for bit against the numpy reference of the quantisation (vtacc.onnx.reference), and its
   float outputs decoded and scored as the float model's;
4. the cycles of its VTA launches on each design's timing profile.

With ``--others``, the wheel's direction classifier and text detector too: imported, compiled and run on
vtasim (bit-exact with numpy), their outputs' SQNR against onnxruntime's float result.
"""

from __future__ import annotations

import argparse
import math
import string
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

HEIGHT, WIDTH = 48, 320  # rapidocr's recogniser input (rec_img_shape)
CLS_WIDTH = 192  # its direction classifier's (cls_image_shape)
WORDS = ("invoice", "total", "date", "amount", "street", "London", "Paris", "order", "number", "VTA", "model",
         "accelerator", "tensor", "Apache", "price", "receipt", "page", "item", "Hello", "World", "quantity")


def models_dir() -> Path:
    """The folder of ONNX models inside the installed rapidocr_onnxruntime package (not imported: only read)."""
    import importlib.util

    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("rapidocr_onnxruntime is not installed: pip install rapidocr_onnxruntime")
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def model_path(kind: str) -> Path:
    """The wheel's model of a kind: ``rec`` (recogniser), ``cls`` (direction classifier), ``det`` (detector)."""
    found = sorted(models_dir().glob(f"*_{kind}_infer.onnx"))
    if not found:
        raise FileNotFoundError(f"no *_{kind}_infer.onnx in {models_dir()}")
    return found[-1]


def characters(path: Path) -> list[str]:
    """The recogniser's classes: CTC's blank, the characters of its ``character`` metadata, and a space."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    meta = {p.key: p.value for p in model.metadata_props}
    return ["<blank>", *meta["character"].splitlines(), " "]


def draw_text(rng: np.random.Generator) -> str:
    """One line of text: random letters and digits, a number, a date, a price or two words."""
    kind = rng.integers(5)
    if kind == 0:
        return "".join(rng.choice(list(string.ascii_letters + string.digits), int(rng.integers(4, 11))))
    if kind == 1:
        return str(int(rng.integers(10, 10**7)))
    if kind == 2:
        return f"{rng.integers(1990, 2030)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
    if kind == 3:
        return f"{rng.integers(1, 1000)}.{rng.integers(100):02d}"
    return f"{rng.choice(WORDS)} {rng.choice(WORDS)}"[:14]


def render(text: str, size: int) -> np.ndarray:
    """The text black on white in Pillow's bundled font at ``size`` points, a margin around it: H x W x 3 uint8."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    left, top, right, bottom = font.getbbox(text)
    pad = size // 4
    image = Image.new("L", (right - left + 2 * pad, bottom - top + 2 * pad), 255)
    ImageDraw.Draw(image).text((pad - left, pad - top), text, font=font, fill=0)
    return np.asarray(image.convert("RGB"))


def preprocess(image: np.ndarray, height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """As rapidocr prepares a line: resized to ``height`` keeping its aspect (at most ``width`` wide; cv2's
    bilinear resize), scaled from [0, 255] to [-1, 1], zero-padded on the right to ``width``: 3 x H x W."""
    import cv2

    h, w = image.shape[:2]
    resized_w = min(width, math.ceil(height * w / h))
    x = cv2.resize(image, (resized_w, height)).astype(np.float32).transpose(2, 0, 1) / 255
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :resized_w] = (x - 0.5) / 0.5
    return out


def lines(rng: np.random.Generator, n: int) -> tuple[list[str], np.ndarray]:
    """``n`` text lines drawn and rendered at random sizes, and their model inputs (N x 3 x 48 x 320)."""
    texts = [draw_text(rng) for _ in range(n)]
    return texts, np.stack([preprocess(render(t, int(rng.integers(20, 41)))) for t in texts])


def decode(probs: np.ndarray, chars: list[str]) -> str:
    """CTC greedy decoding of one line's T x C output: each column's best class, repeats merged, blanks out."""
    best = probs.argmax(-1)
    keep = np.ones(len(best), bool)
    keep[1:] = best[1:] != best[:-1]
    keep &= best != 0
    return "".join(chars[int(i)] for i in best[keep])


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest insertions, deletions and substitutions from ``a`` to ``b``."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (ca != cb))
    return row[-1]


def char_accuracy(got: list[str], want: list[str]) -> float:
    """1 - (summed edit distances / summed lengths of the truth), in per cent."""
    return 100 * (1 - sum(edit_distance(g, w) for g, w in zip(got, want, strict=True)) / sum(map(len, want)))


def sqnr(want: np.ndarray, got: np.ndarray) -> float:
    """The SQNR of ``got`` against ``want``, as the import report measures it (vtacc.onnx.accuracy)."""
    from vtacc.onnx.accuracy import sqnr_db

    want = want.astype(np.float64)
    return sqnr_db(float(np.sum(want * want)), float(np.sum((want - got) ** 2)))


def compile_on_vta(path: Path, calibration: np.ndarray) -> tuple[object, float]:
    """The model imported (calibrated on ``calibration``, its input fixed to one of its shape) and compiled."""
    from vtacc.model import compile_model
    from vtasm.config import default_config

    started = time.perf_counter()
    model = compile_model(path, default_config(), calibration, input_shapes={"x": (1, *calibration.shape[1:])})
    return model, time.perf_counter() - started


def on_vta(model, x: np.ndarray) -> tuple[np.ndarray, bool]:
    """vtasim's float outputs for each of ``x``'s samples, and whether its int8 outputs are bit for bit numpy's."""
    from vtacc.onnx.reference import run_int8
    from vtasim import api
    from vtasim.host.quant import dequantise

    net, qnet = model.network, model.imported.qnet
    output, exact, outs = net.outputs[0], True, []
    for k in range(len(x)):
        got = api.run(net, x[k:k + 1], int8=True)[output]
        exact &= bool(np.array_equal(got, run_int8(qnet, qnet.quantise_input(x[k:k + 1]))[output]))
        outs.append(dequantise(got, net.tensors[output].exp))  # what api.run(net, x) gives in float
    return np.concatenate(outs), exact


def placement(model) -> dict:
    """VTA launches, host steps and the host's operators; the cycles of the launches on each design."""
    from vtasim.timing.names import BUILTIN
    from vtasim.timing.profile import load_profile
    from vtasim.timing.run import time_program

    net = model.network
    cycles = {p: sum(time_program(s.program, load_profile(p), record=False).report.cycles
                     for s in net.steps if s.kind == "vta") for p in BUILTIN}
    return {"launches": sum(s.kind == "vta" for s in net.steps), "host_steps": sum(s.kind == "host" for s in net.steps),
            "host_ops": sorted({n.op for s in net.steps if s.kind == "host" for n in s.nodes}), "cycles": cycles}


def recogniser(n_lines: int = 100, n_calibration: int = 16, seed: int = 0, timing: bool = True) -> dict:
    """Float and VTA int8 character accuracy of the wheel's recogniser on rendered lines, and its figures
    (with ``timing``, the placement and cycles too)."""
    import onnxruntime

    path = model_path("rec")
    chars = characters(path)
    rng = np.random.default_rng(seed)
    _, calibration = lines(rng, n_calibration)
    texts, x = lines(rng, n_lines)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x[k:k + 1]})[0] for k in range(len(x))])
    model, compile_s = compile_on_vta(path, calibration)
    got, exact = on_vta(model, x)
    got = got.reshape(want.shape)
    float_text = [decode(p, chars) for p in want]
    vta_text = [decode(p, chars) for p in got]
    return {"model": path.name, "lines": n_lines, "chars": sum(map(len, texts)), "texts": texts,
            "float_text": float_text, "vta_text": vta_text, "float_acc": char_accuracy(float_text, texts),
            "vta_acc": char_accuracy(vta_text, texts), "exact": exact, "sqnr": sqnr(want, got),
            "compile_s": compile_s, **(placement(model) if timing else {})}


def classifier(n_lines: int = 16, n_calibration: int = 16, seed: int = 0) -> dict:
    """The wheel's direction classifier (0 or 180 degrees) on rendered lines, half of them upside down:
    the labels of float and of VTA int8, and the SQNR of VTA's class probabilities against float's."""
    import onnxruntime

    path = model_path("cls")
    rng = np.random.default_rng(seed)

    def drawn(n: int) -> tuple[np.ndarray, np.ndarray]:
        turned = rng.integers(0, 2, n)
        images = [render(draw_text(rng), int(rng.integers(20, 41))) for _ in range(n)]
        return turned, np.stack([preprocess(im[::-1, ::-1] if t else im, width=CLS_WIDTH)
                                 for im, t in zip(images, turned, strict=True)])

    _, calibration = drawn(n_calibration)
    truth, x = drawn(n_lines)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x[k:k + 1]})[0] for k in range(len(x))])
    model, compile_s = compile_on_vta(path, calibration)
    got, exact = on_vta(model, x)
    got = got.reshape(want.shape)
    return {"model": path.name, "lines": n_lines, "exact": exact, "sqnr": sqnr(want, got), "compile_s": compile_s,
            "float_right": int(np.sum(want.argmax(1) == truth)), "vta_right": int(np.sum(got.argmax(1) == truth)),
            "agree": int(np.sum(want.argmax(1) == got.argmax(1))), **placement(model)}


def page(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A white page of ``height`` x ``width`` pixels with a few drawn lines of text: H x W x 3 uint8."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    y = int(rng.integers(4, 16))
    while y < height - 24:
        size = int(rng.integers(14, 25))
        draw.text((int(rng.integers(4, width // 3)), y), draw_text(rng), font=ImageFont.load_default(size=size),
                  fill="black")
        y += size + int(rng.integers(8, 24))
    return np.asarray(image)


def detector(n_pages: int = 2, n_calibration: int = 8, seed: int = 0, size: tuple[int, int] = (160, 320)) -> dict:
    """The wheel's text detector on drawn pages (rapidocr's normalisation, a size of multiples of 32): the
    SQNR of VTA's text-probability map against float's, and how much of float's text mask (probability
    over rapidocr's 0.3) VTA's covers (intersection over union)."""
    import onnxruntime

    path = model_path("det")
    rng = np.random.default_rng(seed)

    def drawn(n: int) -> np.ndarray:
        return np.stack([(page(rng, *size).astype(np.float32).transpose(2, 0, 1) / 255 - 0.5) / 0.5
                         for _ in range(n)])

    calibration, x = drawn(n_calibration), drawn(n_pages)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x[k:k + 1]})[0] for k in range(len(x))])
    model, compile_s = compile_on_vta(path, calibration)
    got, exact = on_vta(model, x)
    got = got.reshape(want.shape)
    a, b = want > 0.3, got > 0.3
    return {"model": path.name, "pages": n_pages, "exact": exact, "sqnr": sqnr(want, got), "compile_s": compile_s,
            "iou": float(np.sum(a & b) / max(1, np.sum(a | b))), **placement(model)}


def summary(name: str, r: dict) -> str:
    """One line: placement, cycles on each design and compile time."""
    cycles = " | ".join(f"{p} {c / 1e6:,.2f} M" for p, c in r["cycles"].items())
    return (f"{name}: {r['launches']} VTA launches + {r['host_steps']} host steps "
            f"({', '.join(r['host_ops']) or '-'}); cycles {cycles}; compile {r['compile_s']:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100, help="test lines (default 100)")
    parser.add_argument("--calibration", type=int, default=16, help="calibration lines (default 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--others", action="store_true", help="the direction classifier and detector too")
    args = parser.parse_args()
    try:
        models_dir()
    except ModuleNotFoundError as exc:
        print(f"this example needs {exc.name or 'rapidocr_onnxruntime'}: pip install rapidocr_onnxruntime")
        return 2
    r = recogniser(args.lines, args.calibration, args.seed)
    print(f"{r['model']}: {r['lines']} rendered lines ({r['chars']} characters); character accuracy float "
          f"{r['float_acc']:.1f}% (onnxruntime), int8 on vtasim {r['vta_acc']:.1f}% "
          f"({r['vta_acc'] - r['float_acc']:+.1f} points); {'bit-exact' if r['exact'] else 'DIFFERS'} with numpy; "
          f"output SQNR {r['sqnr']:.1f} dB", flush=True)
    print(summary(r["model"], r), flush=True)
    ok = r["exact"] and r["vta_acc"] >= r["float_acc"] - 1
    if args.others:
        for name, run in (("classifier", classifier), ("detector", detector)):
            try:
                o = run(seed=args.seed)
            except Exception as exc:  # reported; the recogniser's figures stand
                print(f"{name}: FAILED: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", flush=True)
                continue
            what = (f"{o['lines']} lines, right direction float {o['float_right']}, VTA {o['vta_right']}, "
                    f"agree on {o['agree']}") if name == "classifier" else \
                f"{o['pages']} pages {'x'.join(map(str, [160, 320]))}, text mask IoU {o['iou']:.3f}"
            print(f"{o['model']}: {what}; {'bit-exact' if o['exact'] else 'DIFFERS'} with numpy; output SQNR "
                  f"{o['sqnr']:.1f} dB", flush=True)
            print(summary(o["model"], o), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
