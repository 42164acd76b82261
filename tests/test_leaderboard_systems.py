"""The structured system of a DAWNBench v1 file, parsed from its free-text ``hardware`` and ``framework``: a table of
real strings with their hand-checked parse, and every one of the 118 real JSON files recognised (but one, named
with the reason)."""

import json
import os
import time
from pathlib import Path

import pytest

from daybreak.leaderboard.ingest.systems import CPU_ONLY, System, dawnbench_framework, from_dawnbench

ENTRIES = Path(os.environ.get("DAYBREAK_DAWNBENCH_ENTRIES")
               or Path(__file__).resolve().parents[2] / "shared/data/dawnbench-entries")

# (hardware as the file writes it) -> (accelerator, count, cpu, cloud instance), checked by hand against the text
# (and, where the text names only an instance, against the provider's published specification of that instance).
REAL_HARDWARE = [
    ("Tesla V100 * 8 GPU / 32 GB / 40 CPU", ("NVIDIA V100", 8, "40 CPUs", "")),
    ("1 K80 / 61 GB / 4 CPU (Amazon EC2 [p2.xlarge])", ("NVIDIA K80", 1, "4 CPUs", "p2.xlarge")),
    ("8 * V100 (AWS p3.16xlarge)", ("NVIDIA V100", 8, "", "p3.16xlarge")),
    ("16 nodes with InfiniBand (8*V100 with NVLink for each node)", ("NVIDIA V100", 128, "", "")),
    ("8 nodes with InfiniBand (8*P100 for each node)", ("NVIDIA P100", 64, "", "")),
    ("16 * 8 * Tesla-V100(ModelArts Service)", ("NVIDIA V100", 128, "", "")),
    ("32 * V100 (4 machines - AWS p3.16xlarge)", ("NVIDIA V100", 32, "", "p3.16xlarge")),
    ("16 p3.16xlarge (AWS)", ("NVIDIA V100", 128, "", "p3.16xlarge")),  # 16 instances of 8
    ("16 ecs.gn6e-c12g1.24xlarge (AlibabaCloud)", ("NVIDIA V100", 128, "", "ecs.gn6e-c12g1.24xlarge")),
    ("p3.16xlarge", ("NVIDIA V100", 8, "", "p3.16xlarge")),
    ("g3.4xlarge", ("NVIDIA M60", 1, "", "g3.4xlarge")),
    ("Azure ND40s_v2", ("NVIDIA V100", 8, "", "ND40s_v2")),
    ("Baidu Cloud Tesla V100*1-16GB/56 GB/12 CPU", ("NVIDIA V100", 1, "12 CPUs", "")),
    ("Baidu Cloud Tesla 8*V100-16GB/448 GB/96 CPU", ("NVIDIA V100", 8, "96 CPUs", "")),
    ("IBM AC922 + 4 * Nvidia Tesla V100 (NCSA HAL)", ("NVIDIA V100", 4, "", "")),
    ("IBM AC922 + Nvidia Tesla V100 (Nimbix np9g1)", ("NVIDIA V100", 1, "", "")),  # "a V100": one
    ("1 GPU (Nvidia GeForce GTX 1080 Ti)", ("NVIDIA GeForce GTX 1080 Ti", 1, "", "")),
    ("Lambda GPU Cloud - 4x GTX 1080 Ti", ("NVIDIA GeForce GTX 1080 Ti", 4, "", "")),
    ("1 NVidia 2080 RTX (dev box)", ("NVIDIA GeForce RTX 2080", 1, "", "")),
    ("Didi Cloud [1 T4 / 16 GB / 8 vCPU]", ("NVIDIA T4", 1, "8 vCPUs", "")),
    ("PingAn Cloud {1 T4 / 128 GB / Xeon(G) Gold 6130}", ("NVIDIA T4", 1, "Intel Xeon Gold 6130", "")),
    ("Huawei Cloud [pi1.2xlarge.4]", ("NVIDIA P4", 1, "", "pi1.2xlarge.4")),
    ("Alibaba Cloud [ecs.gn6i-c8g1.2xlarge]", ("NVIDIA T4", 1, "", "ecs.gn6i-c8g1.2xlarge")),
    ("1 TPUv2", ("Google TPU v2", 1, "", "")),
    ("1/16 of a TPUv2 Pod", ("Google TPU v2", 4, "", "")),  # a v2 Pod is 64 TPU devices
    ("Half of a TPUv2 Pod", ("Google TPU v2", 32, "", "")),
    ("GCP n1-standard-2, Cloud TPU", ("Google TPU", 1, "", "n1-standard-2")),  # the version is not stated
    ("60 GB / 16 CPU (Google Cloud [n1-standard-16])", (CPU_ONLY, 0, "16 CPUs", "n1-standard-16")),
    ("128 nodes with Xeon Platinum 8124M / 144 GB / 36 Cores (Amazon EC2 [c5.18xlarge])",
     (CPU_ONLY, 0, "Intel Xeon Platinum 8124M", "c5.18xlarge")),
    ("Amazon EC2 [c5.2xlarge]", (CPU_ONLY, 0, "", "c5.2xlarge")),
    ("Alibaba Cloud Npu", ("Alibaba Cloud NPU", 1, "", "")),
]

REAL_FRAMEWORKS = [
    ("TensorFlow v1.2", ("TensorFlow", "1.2")),
    ("TensorFlow 1.8.0-rc1", ("TensorFlow", "1.8.0-rc1")),
    ("Pytorch 0.4.1", ("PyTorch", "0.4.1")),
    ("pytorch 0.3.1.post2", ("PyTorch", "0.3.1.post2")),
    ("fastai / pytorch", ("PyTorch", "")),
    ("ncluster / Pytorch 0.5.0a0+0e8088d", ("PyTorch", "0.5.0a0+0e8088d")),
    ("tensorflow 1.5, tensorpack 0.8.1", ("TensorFlow", "1.5")),
    ("AIACC-Training 1.3 + Tensorflow 2.1", ("TensorFlow", "2.1")),
    ("PyTorch v1.0.1 and PaddlePaddle", ("PyTorch", "1.0.1")),
    ("MXNet 0.11.0", ("MXNet", "0.11.0")),
    ("Huawei Optimized MXNet", ("MXNet", "")),
    ("Intel(R) Optimized Caffe", ("Caffe", "")),
    ("PAI-Blade + TensorRT", ("TensorRT", "")),
    ("tensorpack 0.8.0", ("tensorpack", "0.8.0")),  # no known framework named: as written
    ("ifx", ("ifx", "")),
]

# What cannot be recognised, and why: the text names only an instance type whose accelerator daybreak's instance
# table does not hold (the file's own name and its framework "HGAI" hint at an NPU; the hardware text does not say).
UNRECOGNISED = {"Alibaba Cloud [ecs.ebman1.26xlarge]"}


@pytest.mark.parametrize("hardware, expected", REAL_HARDWARE)
def test_real_hardware_strings(hardware, expected):
    system = from_dawnbench(hardware, "")
    assert (system.accelerator, system.accelerator_count, system.cpu, system.cloud_instance) == expected


@pytest.mark.parametrize("framework, expected", REAL_FRAMEWORKS)
def test_real_framework_strings(framework, expected):
    assert dawnbench_framework(framework) == expected
    assert from_dawnbench("1 V100", framework).framework_name == expected[0]


def test_nothing_is_guessed():
    assert from_dawnbench("Alibaba Cloud [ecs.ebman1.26xlarge]", "HIE") == System(
        cloud_instance="ecs.ebman1.26xlarge", framework_name="HIE")
    assert from_dawnbench("our lab machine", "") == System()
    assert from_dawnbench("", "").accelerator_count is None
    # a count the text writes wins over the instance's
    assert from_dawnbench("4 * V100 (AWS p3.16xlarge)", "").accelerator_count == 4


def test_long_odd_text_is_read_in_linear_time():
    for text in ("1 " * 500, "1*" * 500, "8*" + "a" * 990, "16 nodes " + "8*x " * 240, "Tesla " * 160 + "V100"):
        start = time.perf_counter()
        from_dawnbench(text[:1000], "pytorch " * 120)
        assert time.perf_counter() - start < 0.5, text[:20]


@pytest.mark.skipif(not ENTRIES.is_dir(), reason=f"DAWNBench entries not found at {ENTRIES}")
def test_every_real_file_has_its_accelerator_recognised():
    files = sorted(ENTRIES.rglob("*.json"))
    assert len(files) == 118
    missing, frameworks = set(), set()
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
        system = from_dawnbench(doc["hardware"], doc["framework"])
        if not system.accelerator:
            missing.add(doc["hardware"])
        elif system.accelerator != CPU_ONLY:
            assert system.accelerator_count and system.accelerator_count >= 1, doc["hardware"]
        assert system.framework_name, doc["framework"]
        frameworks.add(system.framework_name)
    assert missing == UNRECOGNISED
    assert {"PyTorch", "TensorFlow", "MXNet", "Caffe", "TensorRT"} <= frameworks
