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
