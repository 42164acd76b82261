"""Datasheet peaks (daybreak.measure.datasheet): real torch device names map to the right row, every row is sourced
and dense, and MFU says why when it cannot be computed."""

import json
import re
from importlib import resources

import pytest

from daybreak.measure.datasheet import PRECISIONS, datasheet_peak, datasheet_rows, match_gpu, mfu

# Names as torch.cuda.get_device_name() reports them (cudaDeviceProp.name) -> the catalog row.
REAL_NAMES = {
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla V100-PCIE-16GB": "V100 PCIe",
    "Tesla V100-PCIE-32GB": "V100 PCIe",
    "Tesla V100S-PCIE-32GB": "V100S PCIe",
    "Tesla T4": "T4",
    "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB",
    "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA A10": "A10",
    "NVIDIA A10G": "A10G",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA B200": "B200 (HGX)",
}
# Close relatives that must not borrow another GPU's row.
UNKNOWN_NAMES = ["NVIDIA L40", "NVIDIA A100X", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 4090", "Tesla P100-PCIE-16GB",
                 "Tesla V100-SXM3-32GB", "NVIDIA A30", "NVIDIA A40", "cpu", ""]


@pytest.mark.parametrize("name,model", sorted(REAL_NAMES.items()))
def test_torch_device_names_map_to_exactly_one_row(name, model):
    hits = [r.model for r in datasheet_rows() if r.matches(name)]
    assert hits == [model]
    assert match_gpu(name).model == model


@pytest.mark.parametrize("name", UNKNOWN_NAMES)
def test_unknown_gpus_give_none_with_a_reason(name):
    assert match_gpu(name) is None
    peak = datasheet_peak(name, "bf16")
    assert peak.tflops is None and peak.flops_per_s is None and "no datasheet peak" in peak.reason
    m = mfu(1e12, name, "bf16")
    assert m.value is None and m.reason == peak.reason


def test_every_row_has_a_source_and_sane_dense_figures():
    raw = json.loads(resources.files("daybreak").joinpath("catalog/datasheet_peaks.json").read_text())
    assert raw["precisions"] == list(PRECISIONS) and "sparsity" in raw["note"]
    models = set()
    for row in datasheet_rows():
        assert row.model not in models
        models.add(row.model)
        assert row.source.strip() and row.url.startswith("https://") and re.fullmatch(r"\d{4}-\d{2}", row.date)
        assert row.basis in ("datasheet", "derived", "third-party")
        assert row.basis == "datasheet" or row.notes  # anything not printed on a datasheet says how it was got
        assert row.match and all(re.compile(p) for p in row.match)
        assert row.tflops["fp32"] and row.tflops["fp16"], row.model
        for p, v in row.tflops.items():
            assert v is None or 1 <= v <= 5000, (row.model, p, v)
        # dense = printed sparse / 2, to the datasheet's rounding (the L40S sheet prints 362.05 dense next to 733
        # sparse: its own dense figure is used); tensor rates are above plain fp32
        for p, sparse in row.datasheet_sparse.items():
            assert row.tflops[p] == pytest.approx(sparse / 2, rel=0.015), (row.model, p)
        for p in ("tf32", "bf16", "fp16"):
            if row.tflops[p] is not None and row.model != "A10G":
                assert row.tflops[p] > row.tflops["fp32"], (row.model, p)
    assert {"V100 SXM2", "T4", "A100 SXM4 40GB", "A100 SXM4 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB", "A10G", "L4",
            "L40S", "H100 SXM", "H100 PCIe", "H100 NVL", "H200 SXM", "B200 (HGX)"} <= models


def test_known_dense_figures():
    assert datasheet_peak("NVIDIA A100-SXM4-80GB", "bf16").tflops == 312.0  # 624 printed "with sparsity"
    assert datasheet_peak("NVIDIA A100-SXM4-80GB", "tf32").tflops == 156.0
    assert datasheet_peak("NVIDIA A100-SXM4-80GB", "fp32").tflops == 19.5
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "fp16").tflops == 989.5
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "float32").tflops == 67.0  # alias
    assert datasheet_peak("NVIDIA L4", "bfloat16").tflops == 121.0
    assert datasheet_peak("Tesla T4", "fp16").tflops == 65.0


def test_mfu_and_a_precision_the_gpu_lacks():
    m = mfu(156e12, "NVIDIA A100-SXM4-40GB", "bf16")
    assert m.value == pytest.approx(0.5) and m.reason is None
    assert m.peak.model == "A100 SXM4 40GB" and m.peak.source.startswith("NVIDIA A100") and m.peak.date
    v100 = mfu(10e12, "Tesla V100-SXM2-16GB", "bf16")
    assert v100.value is None and "no bf16 peak" in v100.reason and v100.peak.model == "V100 SXM2"
    with pytest.raises(ValueError, match="unknown precision"):
        datasheet_peak("NVIDIA L4", "int8")
    with pytest.raises(ValueError):
        mfu(float("nan"), "NVIDIA L4", "bf16")
