"""Layer 1: built-in catalogs of GPU types, models and datasets.

Each entry carries a one-line source. Scenario files refer to entries by their lower-case key (GPU types by
their upper-case name) and may override GPU types or add inline models.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuType:
    """A GPU model: dense bf16 peak, memory, power draw, and the share of its peak that a transformer layer's
    kernels reach in pipeline-parallel training (None where no published run sets it)."""

    name: str
    tflops: float  # dense bf16/fp16 tensor-core peak
    memory_gb: float
    busy_watts: float
    idle_watts: float
    kernel_efficiency: float | None = None
    failures_per_gpu_day: float | None = None  # where a scenario's failures give this type a rate of its own


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer, described by what the pipeline model needs."""

    name: str
    params_b: float  # billions of parameters
    layers: int
    hidden: int

    @property
    def params(self) -> float:
        return self.params_b * 1e9


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """A training dataset, described by its size in tokens (one epoch)."""

    name: str
    tokens: float
    source: str


GPU_CATALOG: dict[str, GpuType] = {
    # NVIDIA RTX A6000 datasheet: 154.8 dense FP16 tensor TFLOPS, 48 GB, 300 W TDP; idle ~50 W (assumed, ~15% of TDP).
    "A6000": GpuType("A6000", tflops=154.8, memory_gb=48.0, busy_watts=300.0, idle_watts=50.0),
    # NVIDIA A100 SXM 80 GB datasheet: 312 dense BF16 TFLOPS, 400 W; idle ~15% of TDP (assumed). Kernel efficiency:
    # set by BLOOM-176B's training run (384 A100, bigscience tr11-176B-ml: 104.70 s per iteration), the value at
    # which GeoPipe times that run as published (benchmarks/calibration.py --fit; docs/calibration.md).
    "A100": GpuType("A100", tflops=312.0, memory_gb=80.0, busy_watts=400.0, idle_watts=60.0, kernel_efficiency=0.532),
    # NVIDIA H100 SXM datasheet: 989 dense BF16 TFLOPS, 80 GB, 700 W; idle ~15% of TDP (assumed). Kernel efficiency:
    # set by NVIDIA's DGX Cloud benchmarking recipes, BF16, release v24.11.1 (Llama 3.1 70B and 405B, GPT-3 175B;
    # the fourth, Nemotron-4 340B, is held back and tests it): the geometric mean of the values at which GeoPipe
    # times each as published (benchmarks/calibration.py --fit; docs/calibration.md).
    "H100": GpuType("H100", tflops=989.0, memory_gb=80.0, busy_watts=700.0, idle_watts=105.0, kernel_efficiency=0.564),
    # NVIDIA L40S datasheet: 362 dense FP16 tensor TFLOPS, 48 GB, 350 W; idle ~15% of TDP (assumed).
    "L40S": GpuType("L40S", tflops=362.0, memory_gb=48.0, busy_watts=350.0, idle_watts=52.0),
    # NVIDIA V100 SXM2 32 GB datasheet: 125 FP16 tensor TFLOPS, 300 W; idle ~15% of TDP (assumed).
    "V100": GpuType("V100", tflops=125.0, memory_gb=32.0, busy_watts=300.0, idle_watts=45.0),
}

MODEL_CATALOG: dict[str, ModelSpec] = {
    # Meta Llama-3.1-70B config.json: 80 layers, hidden 8192, 70.6B parameters.
    "llama-3.1-70b": ModelSpec("llama-3.1-70b", params_b=70.6, layers=80, hidden=8192),
    # Qwen2.5-14B config.json: 48 layers, hidden 5120, 14.7B parameters.
    "qwen2.5-14b": ModelSpec("qwen2.5-14b", params_b=14.7, layers=48, hidden=5120),
    # Qwen2.5-32B config.json: 64 layers, hidden 5120, 32.5B parameters.
    "qwen2.5-32b": ModelSpec("qwen2.5-32b", params_b=32.5, layers=64, hidden=5120),
    # TII Falcon-40B config.json: 60 layers, hidden 8192, 41.8B parameters.
    "falcon-40b": ModelSpec("falcon-40b", params_b=41.8, layers=60, hidden=8192),
    # Google Gemma-3-27B text config: 62 layers, hidden 5376, 27.4B parameters.
    "gemma-3-27b": ModelSpec("gemma-3-27b", params_b=27.4, layers=62, hidden=5376),
    # FLM-101B (Li et al., arXiv 2309.03852): 80 layers, hidden 10240, 101B parameters.
    "flm-101b": ModelSpec("flm-101b", params_b=101.0, layers=80, hidden=10240),
    # Meta Llama-3.1-8B config.json: 32 layers, hidden 4096, 8.03B parameters.
    "llama-3.1-8b": ModelSpec("llama-3.1-8b", params_b=8.03, layers=32, hidden=4096),
    # Meta Llama-2-13B config.json: 40 layers, hidden 5120, 13.0B parameters.
    "llama-2-13b": ModelSpec("llama-2-13b", params_b=13.0, layers=40, hidden=5120),
    # Meta Llama-2-70B config.json: 80 layers, hidden 8192, 69.0B parameters.
    "llama-2-70b": ModelSpec("llama-2-70b", params_b=69.0, layers=80, hidden=8192),
    # GPT-3 175B (Brown et al. 2020, arXiv 2005.14165, Table 2.1): 96 layers, hidden 12288, 175B parameters.
    "gpt3-175b": ModelSpec("gpt3-175b", params_b=175.0, layers=96, hidden=12288),
    # BLOOM-176B (bigscience-workshop/bigscience, train/tr11-176B-ml): 70 layers, hidden 14336, 176.2B parameters.
    "bloom-176b": ModelSpec("bloom-176b", params_b=176.2, layers=70, hidden=14336),
    # NVIDIA Nemotron-4 340B (NeMo Nemotron4Config340B): 96 layers, hidden 18432, 340B parameters.
    "nemotron-4-340b": ModelSpec("nemotron-4-340b", params_b=340.0, layers=96, hidden=18432),
    # Meta Llama-3.1-405B config.json: 126 layers, hidden 16384, 405B parameters.
    "llama-3.1-405b": ModelSpec("llama-3.1-405b", params_b=405.0, layers=126, hidden=16384),
    # Megatron-LM's 1T model (Narayanan et al. 2021, arXiv 2104.04473, Table 1): 128 layers, hidden 25600, 1008B.
    "megatron-1t": ModelSpec("megatron-1t", params_b=1008.0, layers=128, hidden=25600),
}

DATASET_CATALOG: dict[str, DatasetSpec] = {
    "alpaca": DatasetSpec(
        "alpaca",
        tokens=6.0e6,
        source="tatsu-lab/alpaca: 52,002 examples, ~24 MB of formatted text at ~4 bytes per BPE token",
    ),
    "wikitext-103": DatasetSpec(
        "wikitext-103",
        tokens=103_227_021.0,
        source="Merity et al. 2016 (arXiv 1609.07843), Table 1: 103,227,021 training tokens",
    ),
    "openwebtext": DatasetSpec(
        "openwebtext",
        tokens=9_035_582_198.0,
        source="karpathy/nanoGPT data/openwebtext/readme.md: train split has 9,035,582,198 GPT-2 tokens",
    ),
}
