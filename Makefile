# The two commands of the README. Both create and use a local .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint clean bytecode

$(BIN)/python:
	$(PY) -m venv $(VENV)

# The editable install puts the checkout on sys.path with a plain .pth line
# (compat mode): the default import-hook finder costs every process ~20 ms.
$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	touch $(STAMP)

# Byte-compile our sources as pip does for an installed package, so that every tool
# starts without recompiling them (where PYTHONDONTWRITEBYTECODE is set, Python
# never caches them by itself). Quick when nothing changed.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q vtasm vtasim vtacc

demo: $(STAMP) bytecode
	@mkdir -p out
	@echo "== 1. A CNN for scikit-learn's 8x8 digits: trained in numpy, exported to ONNX, quantised, run on vtasim =="
	$(BIN)/python examples/digits/train.py out/digits
	$(BIN)/vtacc out/digits/digits.onnx --calibrate out/digits/calibration.npy -o out/digits/digits.vbin
	$(BIN)/vtacc out/digits/digits.onnx --calibrate out/digits/calibration.npy --emit vk -o out/digits/digits.vk
	$(BIN)/python examples/digits/run.py out/digits
	@echo "-- the network as kernel language: out/digits/digits.vk (weights: out/digits/digits.npz)"
	@echo
	@echo "== 1b. GoogLeNet as a caffe2 export writes it (random weights, 64x64): VTA launches with host steps =="
	$(BIN)/python examples/zoo/build.py googlenet out/zoo/googlenet.onnx --size 64
	@$(BIN)/python -c "import numpy as n; r = n.random.default_rng(0); n.save('out/zoo/cal.npy', r.normal(0, 1, (8, 3, 64, 64)).astype('f4')); n.save('out/zoo/image.npy', r.normal(0, 1, (1, 3, 64, 64)).astype('f4'))"
	$(BIN)/vtacc out/zoo/googlenet.onnx --calibrate out/zoo/cal.npy -o out/zoo/googlenet.vbin 2> out/zoo/report.txt
	@echo "-- the import report's end (all of it: out/zoo/report.txt)"; tail -n 4 out/zoo/report.txt
	$(BIN)/vtasim run out/zoo/googlenet.vbin --input data_0=out/zoo/image.npy --output prob_1=out/zoo/prob.npy \
		--timing --timeline out/zoo/googlenet_steps.png
	@echo "-- float probabilities: out/zoo/prob.npy; the steps as a picture: out/zoo/googlenet_steps.png"
	@echo "-- the same network on the emulated board of the Chisel shell (a dry run of a Pynq deployment; docs/board.md)"
	$(BIN)/vtasim run out/zoo/googlenet.vbin --input data_0=out/zoo/image.npy --output prob_1=out/zoo/prob_board.npy \
		--board chisel-2021 --platform emulated --timing
	@$(BIN)/python -c "import numpy as n, sys; same = n.array_equal(n.load('out/zoo/prob.npy'), n.load('out/zoo/prob_board.npy')); print('-- board and simulator give the same probabilities:', same); sys.exit(0 if same else 1)"
	@echo "-- all nine model-zoo networks, checked against numpy and onnxruntime: python examples/zoo/run.py --all"
	@echo
	@echo "== 2. ResNet-18 layer C8 with the conv_opt schedule: kernel -> assembly -> binary -> run =="
	$(BIN)/vtacc examples/resnet_c8.vk --explain -o out/resnet_c8.vasm
	$(BIN)/vtasm assemble out/resnet_c8.vasm -o out/resnet_c8.vbin
	@$(BIN)/python examples/demo_data.py inputs c8 out
	$(BIN)/vtasim run out/resnet_c8.vbin --input x=out/x.npy --input w=out/w.npy --input b=out/b.npy \
		--output y=out/y.npy --profile --check-races --trace-file out/resnet_c8.trace
	@$(BIN)/python examples/demo_data.py check c8 out
	@echo "-- first instructions of the trace (all of them: out/resnet_c8.trace, assembly: out/resnet_c8.vasm)"
	@head -n 27 out/resnet_c8.trace
	@echo "-- how fast VTA itself would run it: the timing model of the HLS design of the Pynq boards, the default (docs/timing.md)"
	$(BIN)/vtasim run out/resnet_c8.vbin --timing-only --timeline out/resnet_c8_timeline.png
	@echo "-- its timeline: out/resnet_c8_timeline.png (a Perfetto trace: --timeline out/resnet_c8.json)"
	@echo
	@echo "== 3. The hand-written vector addition examples/vadd.vasm =="
	$(BIN)/vtasm assemble examples/vadd.vasm -o out/vadd.vbin
	@$(BIN)/python examples/demo_data.py inputs vadd out
	$(BIN)/vtasim run out/vadd.vbin --input A=out/A.npy --input B=out/B.npy --output C=out/C.npy \
		--check-races --lint --trace-file out/vadd.trace
	@$(BIN)/python examples/demo_data.py check vadd out
	@echo "-- its trace: out/vadd.trace; its runtime-style listing: vtasm dump out/vadd.vbin --uops"
	@echo
	@echo "== 4. A design-space sweep on a local Dask cluster: two ResNet-18 layers over 16 VTA variants =="
	$(BIN)/vtacc explore examples/explore/quick.toml -o out/explore
	@echo "-- its table: out/explore/points.csv; its Pareto pictures: out/explore/pareto-memory.png, pareto-macs.png"

test: $(STAMP) bytecode
	$(BIN)/ruff check vtasm vtasim vtacc tests benchmarks examples
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check vtasm vtasim vtacc tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
