"""The config spaces of both lanes: ids, constraints, the rejected configs, the module split."""

from __future__ import annotations

import json

import pytest

from oasr_gemm import configs
from oasr_gemm.configs import GemmConfig, Sm80Config


def test_ids_round_trip_and_parameters():
    for c in configs.all_configs():
        assert configs.config_from_id(c.id) == c
        assert configs.config_from_params(c.to_params()) == c
        assert type(c).from_id(c.id) == c
    assert configs.DEFAULT.id == "t128x128x64_c1x1_pp"
    with pytest.raises(ValueError, match="not a GEMM config id"):
        GemmConfig.from_id("b128x64_s3")
    with pytest.raises(ValueError, match="lane"):
        GemmConfig.from_params({**configs.DEFAULT.to_params(), "lane": "sm80_mma"})


def test_the_sm80_lane_names_its_splits():
    sm80 = [c for c in configs.all_configs() if c.lane == configs.SM80_LANE]
    sm90 = [c for c in configs.all_configs() if c.lane == configs.LANE]
    assert configs.all_configs() == sm90 + sm80  # sm90 first: tuning runs list them first
    assert len(sm80) == len(configs.SM80_TILES) * len(configs.SM80_STAGES) * len(
        configs.SM80_SPLITS
    )
    ids = {c.id for c in sm80}
    assert {
        "s80_t64x128x64_w32x64_s4",
        "s80_t64x128x64_w32x64_s4_serial2",
        "s80_t128x128x64_w64x64_s3_parallel8",
        "s80_t128x256x64_w64x64_s4_streamk",
    } <= ids
    streamk = Sm80Config.from_id("s80_t64x64x64_w32x32_s3_streamk")
    assert (streamk.split, streamk.slices, streamk.warps) == ("streamk", 1, 4)
    assert Sm80Config.from_id("s80_t64x64x64_w32x32_s3_parallel8").slices == 8
    for bad in ("s80_t64x64x64_w32x32", "s80_t64x64x64_w32x32_s3_ring2", "t64_w32x32_s3_serial"):
        with pytest.raises(ValueError, match="config id"):
            configs.config_from_id(bad)
    with pytest.raises(ValueError, match="lane"):
        Sm80Config.from_params(configs.DEFAULT.to_params())


def test_sm80_constraints(monkeypatch):
    def why(*args):
        return configs.reject_reason(Sm80Config(*args))

    assert why(64, 64, 64, 32, 32, 3, "serial", 2) is None
    assert "tiles" in why(64, 16, 64, 32, 16, 3)  # a 16-wide tile is not offered
    assert "stages" in why(64, 64, 64, 32, 32, 6)
    assert "split" in why(64, 64, 64, 32, 32, 3, "serial", 3)
    assert "split" in why(64, 64, 64, 32, 32, 3, "ring", 2)
    # widened axes are still guarded
    wider = (*configs.SM80_TILES, (64, 16, 64, 32, 16), (128, 256, 64, 32, 32))
    monkeypatch.setattr(configs, "SM80_TILES", wider)
    monkeypatch.setattr(configs, "SM80_STAGES", (3, 4, 5))
    assert "warp would not cover" in why(64, 16, 64, 32, 16, 3)
    assert "32 warps" in why(128, 256, 64, 32, 32, 3)
    assert "shared memory" in why(128, 256, 64, 64, 64, 5)


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
        if c.lane != configs.LANE:
            continue
        acc = c.tile_m * c.tile_n // ((2 if c.schedule == "cooperative" else 1) * 128)
        assert acc <= configs.MAX_ACC_PER_THREAD
    assert "schedule" in configs.reject_reason(GemmConfig(128, 128, 64, 1, 1, "streamk"))
    assert "cluster" in configs.reject_reason(GemmConfig(128, 128, 64, 2, 2, "cooperative"))


def test_production_and_tuning_configs_split_the_space():
    production = configs.production_configs("9.0a")
    tuning = configs.tuning_configs("9.0a")
    assert configs.DEFAULT == production[0]
    assert not set(production) & set(tuning)
    assert set(production) | set(tuning) == set(configs.all_configs())
    assert all(configs.reject_reason(c) is None for c in production)


def test_shipped_configs_join_the_production_set_once(tmp_path, monkeypatch):
    shipped = GemmConfig(256, 128, 64, 2, 1, "cooperative")
    shipped_sm80 = Sm80Config(64, 128, 64, 32, 64, 4, "serial", 4)
    unbuildable = GemmConfig(256, 256, 64, 1, 1, "cooperative")
    path = tmp_path / "sm90" / "gemm.json"
    path.parent.mkdir()
    listed = (shipped_sm80, shipped, unbuildable)
    path.write_text(json.dumps({"configs": {c.id: c.to_params() for c in listed}}))
    monkeypatch.setattr(configs, "SHIPPED_DB", path)
    configs.production_configs.cache_clear()
    try:
        production = configs.production_configs("9.0a")
        assert production[: 1 + len(configs.BASIS)] == (configs.DEFAULT, *configs.BASIS)
        assert shipped in production and unbuildable not in production
        assert production[-1] == shipped_sm80  # each lane's configs after the other's
        assert shipped not in configs.tuning_configs("9.0a")
        assert shipped_sm80 not in configs.tuning_configs("9.0a")
        path.write_text("{}")  # frozen: a later change of the file does not move configs
        assert configs.production_configs("9.0a") == production
    finally:
        configs.production_configs.cache_clear()
