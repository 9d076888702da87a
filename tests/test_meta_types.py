"""The long tail: every transformers model type with a causal-LM class, built by vramlint's meta-device
path (models/meta.py) from its default config, has exactly the parameters transformers' own
``num_parameters()`` counts (recorded by dev/meta_types.py in tests/data/meta_types.json)."""

from __future__ import annotations

import json
import warnings

import pytest

from conftest import DATA

transformers = pytest.importorskip("transformers")
RECORDED = json.loads((DATA / "meta_types.json").read_text())
TYPES = RECORDED["types"]
BUILT = sorted(t for t, entry in TYPES.items() if "params" in entry)

pytestmark = pytest.mark.skipif(transformers.__version__ != RECORDED["transformers"],
                                reason=f"recorded with transformers {RECORDED['transformers']}")


def default_config(model_type: str) -> dict:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    warnings.simplefilter("ignore")
    return {**CONFIG_MAPPING[model_type]().to_dict(), **TYPES[model_type].get("overrides", {})}


def test_every_causal_lm_type_is_listed_and_nearly_all_build():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    assert set(TYPES) == set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    assert len(BUILT) >= 0.95 * len(TYPES)
    assert all(entry.get("unbuildable") for t, entry in TYPES.items() if t not in BUILT)   # each with its reason


@pytest.mark.parametrize("model_type", BUILT)
def test_meta_path_counts_what_transformers_counts(model_type):
    from vramlint.models.meta import meta_shape
    shape, why = meta_shape(default_config(model_type))
    assert shape is not None, why
    assert shape.params == TYPES[model_type]["params"]


def test_an_unmodelled_type_is_read_through_transformers(tmp_path):
    """granite (not modelled by hand) from its config.json: its layers as transformers builds them."""
    from vramlint.models import read_model
    config = default_config("granite")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    shape = read_model(str(path))
    assert shape.shape_by == "transformers" and shape.params == TYPES["granite"]["params"]
    assert {"q", "k", "v", "o", "gate", "up", "down"} <= set(shape.layers[0].linears(shape.hidden_size, shape.block))


def test_a_hybrid_types_mixer_layers_are_said_to_be_priced_as_decoder_layers(tmp_path):
    """nemotron_h (Mamba-2, MLP-only and attention layers) from its default config, trained with TRL on one
    H100: estimated, and the estimate says that its layers without attention of their own are priced as
    decoder layers (their kernels' saved tensors are modelled for Megatron's hybrid stack alone); granite,
    every layer attention, says nothing of it."""
    import subprocess
    import sys
    from conftest import ROOT
    notes = {}
    for model_type in ("nemotron_h", "granite"):
        folder = tmp_path / model_type
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(default_config(model_type)))
        recipe = folder / "sft.yaml"
        recipe.write_text(f"model_name_or_path: {folder}\nper_device_train_batch_size: 1\nmax_length: 1024\n"
                          "learning_rate: 2.0e-5\nbf16: true\n")
        proc = subprocess.run([sys.executable, "-m", "vramlint", "check", str(recipe), "--gpus", "1xH100",
                               "--format", "json"], capture_output=True, text=True, timeout=300, cwd=ROOT)
        entry = json.loads(proc.stdout)["files"][0]
        notes[model_type] = [a for a in entry["estimate"]["assumptions"] if "no attention of their own" in a]
    layers = default_config("nemotron_h")["layers_block_type"]
    assert len(notes["nemotron_h"]) == 1 and notes["granite"] == []
    mixers = sum(kind not in ("attention", "full_attention") for kind in layers)
    assert notes["nemotron_h"][0].startswith(f"nemotron_h: {mixers} of its {len(layers)} layers")
