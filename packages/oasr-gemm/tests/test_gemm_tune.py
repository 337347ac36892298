"""The tuning run's logic without a GPU: the gate, the regions, the entries, and a round trip
through the tuning file into `select_default_config`."""

from __future__ import annotations

import json

import pytest
import torch

from oasr_gemm import configs, selection, tune
from oasr_gemm.configs import DEFAULT
from oasr_jit import parse_arch, tuning

SMALL, WIDE = configs.BASIS


def test_the_gate_keeps_the_default_unless_beaten_clearly():
    assert tune.winner({DEFAULT.id: 10.0, SMALL.id: 9.6, "torch": 12.0}) == "default"
    assert tune.winner({DEFAULT.id: 10.0, SMALL.id: 9.0, "torch": 12.0}) == SMALL.id
    assert tune.winner({DEFAULT.id: 10.0, SMALL.id: 11.0, "torch": 8.0}) == "torch"
    # cuBLAS wins whenever it is the fastest: no gate protects our kernel against it
    assert tune.winner({DEFAULT.id: 10.0, SMALL.id: 11.0, "torch": 9.9}) == "torch"
    # ... and the default the gate keeps is compared with cuBLAS, not the config it beat
    assert tune.winner({DEFAULT.id: 10.0, SMALL.id: 9.6, "torch": 9.9}) == "torch"


def test_our_kernel_must_beat_cublas_by_the_margin():
    assert tune.TORCH_MARGIN == 1.03
    assert tune.winner({"torch": 10.0, DEFAULT.id: 10.0}) == "torch"  # a tie
    assert tune.winner({"torch": 10.0, DEFAULT.id: 9.8}) == "torch"  # 2% is noise
    assert tune.winner({"torch": 10.0, DEFAULT.id: 9.5}) == "default"
    assert tune.winner({"torch": 10.0, DEFAULT.id: 9.8}, margin=1.0) == "default"
    assert tune.winner({DEFAULT.id: 9.0}) == "default"  # no cuBLAS arm (e.g. an sm80-only M)


def test_rederive_rewrites_regions_from_the_evidence(tmp_path):
    path = tmp_path / "gemm.json"
    evidence = {
        "M=64": {DEFAULT.id: 5.0, "torch": 5.1},
        "M=8000": {DEFAULT.id: 20.0, WIDE.id: 15.0},
    }
    tuning.write_entries(
        path,
        family="gemm",
        arch="sm90",
        lane=configs.LANE,
        entries={
            "gemm|op=gemm|dt=half|N=512|K=512": {
                "regions": [[64, SMALL.id], [8000, WIDE.id]],
                "evidence": evidence,
            }
        },
        configs={WIDE.id: WIDE.to_params(), SMALL.id: SMALL.to_params()},
        validators={"gpu": "NVIDIA H200 (where it was measured)"},
        fresh=True,
    )
    assert tune.main(["--rederive", str(path)]) == 0
    data = json.loads(path.read_text())
    entry = data["entries"]["gemm|op=gemm|dt=half|N=512|K=512"]
    assert entry["regions"] == [[64, "torch"], [8000, WIDE.id]]
    assert entry["evidence"] == evidence
    assert set(data["configs"]) == {WIDE.id}  # SMALL is named by no region any more
    assert data["validators"] == {"gpu": "NVIDIA H200 (where it was measured)"}  # kept


def test_regions_merge_runs_and_stay_closed():
    pts = [
        (4096, {DEFAULT.id: 10.0, WIDE.id: 8.0}),
        (64, {DEFAULT.id: 3.0, "torch": 2.0}),
        (256, {DEFAULT.id: 3.0, "torch": 2.5}),
        (1024, {DEFAULT.id: 5.0, "torch": 5.1}),
        (8000, {DEFAULT.id: 20.0, WIDE.id: 15.0}),
    ]
    # at 1024 the default is 2% faster than cuBLAS: inside the margin, so cuBLAS
    assert tune.partition(pts) == [[1024, "torch"], [8000, WIDE.id]]


def test_signatures_come_from_the_suite():
    sigs = tune.signatures("asr")
    assert ("gemm", "fp16", 2048, 256) in sigs and ("gemm_activation", "fp16", 5120, 1280) in sigs
    assert len(sigs) == len(set(sigs)) and all(dtype == "fp16" for _, dtype, _, _ in sigs)
    assert ("gemm", "bf16", 256, 256) in tune.signatures("asr", ("fp16", "bf16"))


def test_entries_round_trip_into_the_selection(tmp_path, monkeypatch):
    """Fake timings: the small tile wins at M <= 256, cuBLAS at M 1024, the default above."""

    def measure(op, dtype, M, N, K, arms):
        assert set(arms) == {c.id for c in configs.production_configs("9.0a")} | {"torch"}
        times = {arm: 10.0 for arm in arms} | {"torch": 12.0}
        if M <= 256:
            times[SMALL.id] = 5.0
        elif M == 1024:
            times["torch"] = 6.0
        return times

    sig = ("gemm", "fp16", 512, 256)
    ladder = (64, 256, 1024, 4096)
    entries = tune.build_entries(
        [sig], configs.production_configs("9.0a"), measure, ladder, as_half=True
    )
    key = "gemm|op=gemm|dt=half|N=512|K=256"  # serves bf16 too
    assert entries[key]["regions"] == [[256, SMALL.id], [1024, "torch"], [4096, "default"]]
    assert entries[key]["evidence"]["M=64"][SMALL.id] == 5.0
    user = tmp_path / "user"
    monkeypatch.setenv("OASR_TUNE_USER_DB", str(user))
    monkeypatch.setattr(selection._db, "system_dir", tmp_path / "none")
    monkeypatch.setattr(selection, "_arch", parse_arch("9.0a"))
    tuning.write_entries(
        user / "sm90" / "gemm.json",
        family="gemm",
        arch="sm90",
        lane=configs.LANE,
        entries=entries,
        configs={SMALL.id: SMALL.to_params()},
        validators={"gpu": "test"},
    )
    try:
        pick = selection.select_default_config
        assert pick("gemm", 200, 512, 256, torch.float16) == selection.Selection(SMALL, "user")
        assert pick("gemm", 1000, 512, 256, torch.float16) == selection.Selection(None, "user")
        assert pick("gemm", 4096, 512, 256, torch.float16).config == DEFAULT
        assert pick("gemm", 4097, 512, 256, torch.float16).tier == "default"  # past the regions
        assert pick("gemm", 200, 512, 256, torch.bfloat16).config == SMALL
    finally:
        tuning.reload()


def test_candidate_configs_named_on_the_command_line():
    production = list(configs.production_configs("9.0a"))
    assert tune.candidate_configs("production", "9.0a") == production
    assert tune.candidate_configs("all") == configs.all_configs()
    extra = configs.tuning_configs("9.0a")[0]  # not a production config
    chosen = tune.candidate_configs(f"{extra.id}, {DEFAULT.id}", "9.0a")
    assert chosen == [*production, extra]
    with pytest.raises(SystemExit, match="unknown config"):
        tune.candidate_configs("t999x1x1_c1x1_pp", "9.0a")


def test_sm80_configs_are_measured_at_small_m_only():
    split = configs.Sm80Config(64, 64, 64, 32, 32, 4, "parallel", 4)
    seen = {}

    def measure(op, dtype, M, N, K, arms):
        seen[M] = set(arms)
        return {arm: {split.id: 3.0, "torch": 12.0}.get(arm, 10.0) for arm in arms}

    ladder = (64, tune.SM80_MAX_M, tune.SM80_MAX_M + 1)
    entries = tune.build_entries([("gemm", "fp16", 512, 256)], [DEFAULT, split], measure, ladder)
    assert seen[64] == seen[tune.SM80_MAX_M] == {DEFAULT.id, split.id, "torch"}
    assert seen[tune.SM80_MAX_M + 1] == {DEFAULT.id, "torch"}
    (entry,) = entries.values()
    assert entry["regions"] == [[tune.SM80_MAX_M, split.id], [tune.SM80_MAX_M + 1, "default"]]
    with pytest.raises(ValueError, match="must include the default"):
        tune.build_entries([("gemm", "fp16", 512, 256)], [split], measure, ladder)


def test_signatures_can_be_filtered():
    assert tune.signatures("asr", holding="N=2048|K=512") == [
        ("gemm", "fp16", 2048, 512),
        ("gemm_activation", "fp16", 2048, 512),
    ]
    assert tune.signatures("asr", holding="op=gemm_activation|")[0][0] == "gemm_activation"
    assert tune.signatures("asr", holding="nothing") == []
