"""The sm90 config space: ids, constraints, the rejected configs, the module split."""

from __future__ import annotations

import json

import pytest

from oasr_gemm import configs
from oasr_gemm.configs import GemmConfig


def test_ids_round_trip_and_parameters():
    for c in configs.all_configs():
        assert GemmConfig.from_id(c.id) == c
        assert GemmConfig.from_params(c.to_params()) == c
    assert configs.DEFAULT.id == "t128x128x64_c1x1_pp"
    with pytest.raises(ValueError, match="not a GEMM config id"):
        GemmConfig.from_id("b128x64_s3")
    with pytest.raises(ValueError, match="lane"):
        GemmConfig.from_params({**configs.DEFAULT.to_params(), "lane": "sm80_mma"})


def test_constraints_cut_what_cannot_build_or_spills():
    rejected = configs.rejected_configs()
    # cooperative needs two warpgroups of 64 rows
    assert "tile_m >= 128" in rejected["t64x128x64_c1x1_coop"]
    # a ping-pong warpgroup holding a 128 x 256 fp32 tile: 256 accumulators per thread
    assert "spills" in rejected["t128x256x64_c1x1_pp"]
    assert "spills" in rejected["t256x256x64_c1x1_coop"]
    built = {c.id for c in configs.all_configs()}
    assert not built & set(rejected)
    assert {"t64x64x64_c1x1_pp", "t128x256x64_c1x1_coop", "t256x128x64_c2x1_coop"} <= built
    for c in configs.all_configs():
        assert configs.reject_reason(c) is None
        acc = c.tile_m * c.tile_n // ((2 if c.schedule == "cooperative" else 1) * 128)
        assert acc <= configs.MAX_ACC_PER_THREAD
    assert "schedule" in configs.reject_reason(GemmConfig(128, 128, 64, 1, 1, "streamk"))
    assert "cluster" in configs.reject_reason(GemmConfig(128, 128, 64, 2, 2, "cooperative"))


def test_production_and_tuning_modules_split_the_space():
    production = configs.production_configs()
    tuning = configs.tuning_configs()
    assert configs.DEFAULT == production[0]
    assert not set(production) & set(tuning)
    assert set(production) | set(tuning) == set(configs.all_configs())
    assert all(configs.reject_reason(c) is None for c in production)


def test_shipped_configs_join_the_production_module_once(tmp_path, monkeypatch):
    shipped = GemmConfig(256, 128, 64, 2, 1, "cooperative")
    unbuildable = GemmConfig(256, 256, 64, 1, 1, "cooperative")
    path = tmp_path / "sm90" / "gemm.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"configs": {c.id: c.to_params() for c in (shipped, unbuildable)}}))
    monkeypatch.setattr(configs, "SHIPPED_DB", path)
    configs.production_configs.cache_clear()
    try:
        production = configs.production_configs()
        assert production[: 1 + len(configs.BASIS)] == (configs.DEFAULT, *configs.BASIS)
        assert shipped in production and unbuildable not in production
        assert shipped not in configs.tuning_configs()
        path.write_text("{}")  # frozen: a later change of the file does not move configs
        assert configs.production_configs() == production
    finally:
        configs.production_configs.cache_clear()
