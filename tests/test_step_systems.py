"""The systems table against the data sheets' printed figures (dense = half the sparse figure)."""
import pytest

from derive.presets import HARDWARE, hardware
from derive.systems import SYSTEMS, system


@pytest.mark.parametrize("name, bf16, fp8, hbm_gb, hbm_tb_s", [
    ("a100-40gb", 312, None, 40, 1.555),   # A100 data sheet: 624 sparse / 2
    ("a100-80gb", 312, None, 80, 2.039),
    ("h100", 989, 1979, 80, 3.35),         # H100 SXM: 1,979 / 3,958 sparse
    ("h200", 989, 1979, 141, 4.8),
    ("b200", 2250, 4500, 180, 8.0),        # HGX B200: 36 / 72 PFLOPS sparse per 8 GPUs
    ("gb200", 2500, 5000, 186, 8.0),       # GB200 NVL72: 360 / 720 PFLOPS sparse per 72 GPUs
    ("b300", 2250, 4500, 288, 8.0),        # HGX B300: 36 / 72 PFLOPS sparse per 8 GPUs; DGX B300 2.3 TB / 8
    ("gb300", 2500, 5000, 288, 8.0),       # GB300 NVL72: 360 / 720 PFLOPS sparse per 72 GPUs
])
def test_data_sheet_figures(name, bf16, fp8, hbm_gb, hbm_tb_s):
    gpu = system(name)
    assert gpu.peak("bf16") == bf16 * 10**12
    assert gpu.peaks.get("fp8") == (None if fp8 is None else fp8 * 10**12)
    assert gpu.hbm_bytes == hbm_gb * 10**9
    assert gpu.hbm_bandwidth == pytest.approx(hbm_tb_s * 10**12)


def test_links_unidirectional():
    # NVLink 3/4/5: 600 / 900 / 1800 GB/s bidirectional per GPU -> half each way
    assert system("a100-80gb").nvlink_bandwidth == 300e9
    assert system("h100").nvlink_bandwidth == 450e9
    assert system("gb200").nvlink_bandwidth == 900e9
    # 400 Gb/s NDR per H100 = 50 GB/s; 200 Gb/s HDR per A100 = 25 GB/s
    assert system("h100").nic_bandwidth == 50e9
    assert system("a100-80gb").nic_bandwidth == 25e9
    assert system("gb200").nvlink_domain == 72 and system("b200").nvlink_domain == 8
    assert system("h100").link(8)[0] == 450e9 and system("h100").link(16)[0] == 50e9
    assert system("gb200").link(64)[0] == 900e9


def test_b300_links_and_fp4():
    # HGX B300: NVLink 5 at 1.8 TB/s bidirectional per GPU, 8 GPUs per board; DGX B300: one ConnectX-8 at
    # 800 Gb/s per GPU = 100 GB/s each way (B200's ConnectX-7: 400 Gb/s = 50 GB/s); FP4 108 PFLOPS dense / 8
    b300 = system("b300")
    assert (b300.nvlink_bandwidth, b300.nvlink_domain, b300.nic_bandwidth) == (900e9, 8, 100e9)
    assert b300.link(8)[0] == 900e9 and b300.link(16)[0] == 100e9 == 2 * system("b200").nic_bandwidth
    assert b300.peak("fp4") == 108e15 / 8 == 13.5e15 and b300.generation == "blackwell"


def test_fp4_only_on_blackwell():
    assert "fp4" in system("b200").peaks and "fp4" not in system("h100").peaks
    with pytest.raises(ValueError, match="dtype"):
        system("h100").peak("fp4")
    with pytest.raises(ValueError, match="gpu"):
        system("v100")


def test_presets_read_the_systems_table():
    assert hardware("a100").peak_flops == SYSTEMS["a100-80gb"].peaks["bf16"]
    assert {name: hw.memory_bytes for name, hw in HARDWARE.items()} == {
        "h100": 80e9, "a100": 80e9, "h200": 141e9, "b200": 180e9, "b300": 288e9}
