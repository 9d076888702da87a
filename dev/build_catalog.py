"""Dev-only: assemble vramlint's offline model catalog (``vramlint/data/catalog.json``).

Each entry holds the model's config.json (the keys that shape memory), where it comes from, and
the parameter count transformers gives for it (``params``, built on the meta device) so the
tests can hold vramlint to it. Sources, in order of preference: the real config files in
../shared/corpus/hf_models (byte copies of published configs, see SOURCES.md), the exact configs
of the H200 measurements in ../shared/groundtruth, and the published config.json of the
HuggingFace repo, transcribed (``"source": "hf:<repo> config.json"``).

    python dev/build_catalog.py ../shared > vramlint/data/catalog.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measured_models import models  # noqa: E402
from param_counts import count, count_language_model, text_config  # noqa: E402

CORPUS = "corpus/hf_models/"
AIC = CORPUS + "ai-dynamo__aiconfigurator__aic-core__src__aiconfigurator_core__model_configs__"
AIC_OLD = CORPUS + "ai-dynamo__aiconfigurator__src__aiconfigurator__model_configs__"
KEEP_OUT = {"auto_map", "transformers_version", "_name_or_path", "bos_token_id", "eos_token_id", "pad_token_id",
            "audio_config", "id2label", "label2id", "task_specific_params"}

L2 = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000,
      "max_position_embeddings": 4096, "torch_dtype": "float16", "rms_norm_eps": 1e-5}
QWEN25 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "torch_dtype": "bfloat16",
          "use_sliding_window": False, "sliding_window": 131072, "max_position_embeddings": 131072}
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16",
         "tie_word_embeddings": False}
QWEN15 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "torch_dtype": "bfloat16", "vocab_size": 152064,
          "max_position_embeddings": 32768, "rope_theta": 1000000.0, "use_sliding_window": False,
          "tie_word_embeddings": False}
QWEN3 = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "vocab_size": 151936,
         "max_position_embeddings": 40960, "rope_theta": 1000000, "torch_dtype": "bfloat16"}
G2 = {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "vocab_size": 256000,
      "sliding_window": 4096, "torch_dtype": "bfloat16", "max_position_embeddings": 8192}
G3 = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "torch_dtype": "bfloat16"}
G3_ROPE = {"rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_local_base_freq": 10000}
G3["vision_config"] = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                       "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
                       "vision_use_head": False}
Q25VL = {"model_type": "qwen2_5_vl", "architectures": ["Qwen2_5_VLForConditionalGeneration"],
         "torch_dtype": "bfloat16", "max_position_embeddings": 128000, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
         "sliding_window": 32768, "use_sliding_window": False,
         "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
Q25VL_VISION = {"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                "in_chans": 3, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14, "window_size": 112,
                "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2, "temporal_patch_size": 2}
LLAMA4_VISION = {"model_type": "llama4_vision_model", "hidden_size": 1408, "intermediate_size": 5632,
                 "num_hidden_layers": 34, "num_attention_heads": 16, "image_size": 336, "patch_size": 14,
                 "num_channels": 3, "pixel_shuffle_ratio": 0.5, "projector_input_dim": 4096,
                 "projector_output_dim": 4096, "vision_output_dim": 4096, "multi_modal_projector_bias": False,
                 "hidden_act": "gelu", "norm_eps": 1e-05, "rope_theta": 10000, "vision_feature_layer": -1,
                 "vision_feature_select_strategy": "default"}
NEOX = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "torch_dtype": "float16",
        "max_position_embeddings": 2048, "tie_word_embeddings": False}
SC2 = {"model_type": "starcoder2", "architectures": ["Starcoder2ForCausalLM"], "vocab_size": 49152,
       "sliding_window": 4096, "max_position_embeddings": 16384, "torch_dtype": "bfloat16", "use_bias": True}

# (HF id, short name, source: a shared/ file or a config dict transcribed from the HF repo)
ENTRIES: list[tuple[str, str, object]] = [
    ("meta-llama/Llama-2-7b-hf", "llama-2-7b", AIC_OLD + "meta-llama--Llama-2-7b-hf_config.json"),
    ("meta-llama/Llama-2-13b-hf", "llama-2-13b", dict(L2, hidden_size=5120, num_hidden_layers=40,
        num_attention_heads=40, num_key_value_heads=40, intermediate_size=13824)),
    ("meta-llama/Llama-2-70b-hf", "llama-2-70b", dict(L2, hidden_size=8192, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=8, intermediate_size=28672)),
    ("codellama/CodeLlama-7b-hf", "codellama-7b", dict(L2, vocab_size=32016, hidden_size=4096,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008,
        max_position_embeddings=16384, rope_theta=1000000, torch_dtype="bfloat16")),
    ("meta-llama/Llama-3.2-1B", "llama-3.2-1b", CORPUS + "MatthewGoldsberry__LLM-Projects__Llama-3.2-1B__config.json"),
    ("meta-llama/Llama-3.2-3B", "llama-3.2-3b", {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 24, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 8192, "vocab_size": 128256, "tie_word_embeddings": True,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}),
    ("meta-llama/Llama-3.1-8B", "llama-3.1-8b", AIC + "meta-llama--Meta-Llama-3.1-8B_config.json"),
    ("meta-llama/Llama-3.1-70B", "llama-3.1-70b", AIC + "meta-llama--Meta-Llama-3.1-70B_config.json"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b", AIC + "meta-llama--Meta-Llama-3.1-70B_config.json"),
    ("meta-llama/Llama-3.1-405B", "llama-3.1-405b", AIC + "meta-llama--Meta-Llama-3.1-405B_config.json"),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "llama-3.1-70b-fp8", AIC + "nvidia--Llama-3.1-70B-Instruct-FP8_config.json"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout",
        (AIC + "meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json", {"vision_config": LLAMA4_VISION})),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick",
        (AIC + "meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json", {"vision_config": LLAMA4_VISION})),
    ("mistralai/Mistral-7B-v0.1", "mistral-7b-v0.1", {"model_type": "mistral", "architectures": ["MistralForCausalLM"],
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}),
    ("mistralai/Mistral-7B-v0.3", "mistral-7b-v0.3", {"model_type": "mistral", "architectures": ["MistralForCausalLM"],
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, "vocab_size": 32768, "sliding_window": None, "rope_theta": 1000000.0,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b", AIC + "mistralai--Mixtral-8x7B-v0.1_config.json"),
    ("mistralai/Mixtral-8x22B-v0.1", "mixtral-8x22b", AIC + "mistralai--Mixtral-8x22B-v0.1_config.json"),
    ("Qwen/Qwen2.5-0.5B", "qwen2.5-0.5b", dict(QWEN25, hidden_size=896, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864, vocab_size=151936,
        tie_word_embeddings=True, max_window_layers=24, max_position_embeddings=32768)),
    ("Qwen/Qwen2.5-1.5B", "qwen2.5-1.5b", AIC_OLD + "Qwen--Qwen2.5-1.5B_config.json"),
    ("Qwen/Qwen2.5-7B", "qwen2.5-7b", AIC_OLD + "Qwen--Qwen2.5-7B_config.json"),
    ("Qwen/Qwen2.5-14B", "qwen2.5-14b", dict(QWEN25, hidden_size=5120, num_hidden_layers=48,
        num_attention_heads=40, num_key_value_heads=8, intermediate_size=13824, vocab_size=152064,
        tie_word_embeddings=False, max_window_layers=48)),
    ("Qwen/Qwen2.5-32B", "qwen2.5-32b", dict(QWEN25, hidden_size=5120, num_hidden_layers=64,
        num_attention_heads=40, num_key_value_heads=8, intermediate_size=27648, vocab_size=152064,
        tie_word_embeddings=False, max_window_layers=64)),
    ("Qwen/Qwen2.5-72B", "qwen2.5-72b", AIC_OLD + "Qwen--Qwen2.5-72B_config.json"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1-distill-qwen-32b",
        AIC_OLD + "deepseek-ai--DeepSeek-R1-Distill-Qwen-32B_config.json"),
    ("Qwen/Qwen1.5-MoE-A2.7B", "qwen1.5-moe-a2.7b", {"model_type": "qwen2_moe",
        "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632, "num_experts": 60,
        "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
        "vocab_size": 151936, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}),
    ("Qwen/Qwen3-0.6B", "qwen3-0.6b", AIC + "Qwen--Qwen3-0.6B_config.json"),
    ("Qwen/Qwen3-1.7B", "qwen3-1.7b", "measure.py:qwen3-1.7b"),
    ("Qwen/Qwen3-4B", "qwen3-4b", dict(QWEN3, hidden_size=2560, num_hidden_layers=36, num_attention_heads=32,
        num_key_value_heads=8, intermediate_size=9728, tie_word_embeddings=True)),
    ("Qwen/Qwen3-8B", "qwen3-8b", AIC + "Qwen--Qwen3-8B_config.json"),
    ("Qwen/Qwen3-14B", "qwen3-14b", dict(QWEN3, hidden_size=5120, num_hidden_layers=40, num_attention_heads=40,
        num_key_value_heads=8, intermediate_size=17408, tie_word_embeddings=False)),
    ("Qwen/Qwen3-32B-FP8", "qwen3-32b-fp8", AIC + "Qwen--Qwen3-32B-FP8_config.json"),
    ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b", AIC + "Qwen--Qwen3-30B-A3B_config.json"),
    ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b", AIC + "Qwen--Qwen3-235B-A22B_config.json"),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3-next-80b-a3b", AIC_OLD + "Qwen--Qwen3-Next-80B-A3B-Thinking_config.json"),
    ("Qwen/Qwen3-VL-8B-Instruct", "qwen3-vl-8b", AIC + "Qwen--Qwen3-VL-8B-Instruct_config.json"),
    ("llava-hf/llava-1.5-7b-hf", "llava-1.5-7b", {"model_type": "llava",
        "architectures": ["LlavaForConditionalGeneration"], "image_token_index": 32000, "projector_hidden_act": "gelu",
        "vision_feature_layer": -2, "vision_feature_select_strategy": "default", "tie_word_embeddings": False,
        "torch_dtype": "float16", "vocab_size": 32064,
        "text_config": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096,
                        "rms_norm_eps": 1e-05, "torch_dtype": "float16", "vocab_size": 32064},
        "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "image_size": 336,
                          "intermediate_size": 4096, "num_attention_heads": 16, "num_hidden_layers": 24,
                          "patch_size": 14, "projection_dim": 768, "vocab_size": 32000}}),
    ("Qwen/Qwen2-VL-7B-Instruct", "qwen2-vl-7b", dict(Q25VL, architectures=["Qwen2VLForConditionalGeneration"],
        model_type="qwen2_vl", max_position_embeddings=32768, hidden_size=3584, intermediate_size=18944,
        num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, max_window_layers=28,
        vocab_size=152064, tie_word_embeddings=False, vision_config={"depth": 32, "embed_dim": 1280, "mlp_ratio": 4,
        "num_heads": 16, "in_chans": 3, "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
        "spatial_patch_size": 14, "temporal_patch_size": 2})),
    ("Qwen/Qwen2.5-VL-3B-Instruct", "qwen2.5-vl-3b", dict(Q25VL, hidden_size=2048, intermediate_size=11008,
        num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=2, max_window_layers=70,
        vocab_size=151936, tie_word_embeddings=True, vision_config=dict(Q25VL_VISION, out_hidden_size=2048))),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl-7b", dict(Q25VL, hidden_size=3584, intermediate_size=18944,
        num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, max_window_layers=28,
        vocab_size=152064, tie_word_embeddings=False, vision_config=dict(Q25VL_VISION, out_hidden_size=3584))),
    ("Qwen/Qwen2.5-VL-72B-Instruct", "qwen2.5-vl-72b", dict(Q25VL, hidden_size=8192, intermediate_size=29568,
        num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8, max_window_layers=80,
        vocab_size=152064, tie_word_embeddings=False,
        vision_config=dict(Q25VL_VISION, intermediate_size=3456, out_hidden_size=8192))),
    ("google/gemma-2b", "gemma-2b", {"model_type": "gemma", "architectures": ["GemmaForCausalLM"],
        "hidden_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1,
        "head_dim": 256, "intermediate_size": 16384, "vocab_size": 256000, "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16"}),
    ("google/gemma-7b", "gemma-7b", {"model_type": "gemma", "architectures": ["GemmaForCausalLM"],
        "hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
        "head_dim": 256, "intermediate_size": 24576, "vocab_size": 256000, "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16"}),
    ("google/gemma-2-2b", "gemma-2-2b", "groundtruth:gemma-2-2b"),
    ("google/gemma-2-9b-it", "gemma-2-9b", CORPUS + "doggy8088__GemmaTokenizerExtractor__gemma-2-9b-it__config.json"),
    ("google/gemma-2-27b-it", "gemma-2-27b", dict(G2, hidden_size=4608, num_hidden_layers=46,
        num_attention_heads=32, num_key_value_heads=16, head_dim=128, intermediate_size=36864,
        query_pre_attn_scalar=144)),
    ("google/gemma-3-1b-it", "gemma-3-1b", {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
        "hidden_size": 1152, "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 256, "intermediate_size": 6912, "vocab_size": 262144, "sliding_window": 512,
        "sliding_window_pattern": 6, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}),
    ("google/gemma-3-4b-it", "gemma-3-4b", dict(G3, text_config={**G3_ROPE, "hidden_size": 2560, "num_hidden_layers": 34,
        "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 10240, "sliding_window": 1024})),
    ("google/gemma-3-12b-it", "gemma-3-12b", dict(G3, text_config={**G3_ROPE, "hidden_size": 3840, "num_hidden_layers": 48,
        "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 15360, "sliding_window": 1024})),
    ("google/gemma-3-27b-it", "gemma-3-27b", dict(G3, text_config={**G3_ROPE, "hidden_size": 5376, "num_hidden_layers": 62,
        "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504,
        "sliding_window": 1024, "query_pre_attn_scalar": 168})),
    ("google/gemma-4-26B-A4B", "gemma-4-26b-a4b", AIC + "google--gemma-4-26B-A4B_config.json"),
    ("microsoft/Phi-3-mini-4k-instruct", "phi-3-mini-4k", "groundtruth:phi-3-mini"),
    ("microsoft/Phi-3-mini-128k-instruct", "phi-3-mini-128k", CORPUS + "ollama__ollama__convert__testdata__phi3__config.json"),
    ("microsoft/Phi-3-medium-4k-instruct", "phi-3-medium-4k", {"model_type": "phi3",
        "architectures": ["Phi3ForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 40,
        "num_attention_heads": 40, "num_key_value_heads": 10, "intermediate_size": 17920, "vocab_size": 32064,
        "sliding_window": 2047, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}),
    ("openai-community/gpt2", "gpt2", CORPUS + "vanu23__chatbot__gpt2__config.json"),
    ("openai-community/gpt2-medium", "gpt2-medium", {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
        "n_embd": 1024, "n_layer": 24, "n_head": 16, "n_positions": 1024, "vocab_size": 50257}),
    ("openai-community/gpt2-large", "gpt2-large", CORPUS + "xu737__PeFAD__gpt2__config.json"),
    ("openai-community/gpt2-xl", "gpt2-xl", {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
        "n_embd": 1600, "n_layer": 48, "n_head": 25, "n_positions": 1024, "vocab_size": 50257}),
    ("EleutherAI/pythia-410m", "pythia-410m", CORPUS + "Avent-IQ__pythia-410m-chatbot__config.json"),
    ("EleutherAI/pythia-1b", "pythia-1b", "groundtruth:pythia-1b"),
    ("EleutherAI/pythia-6.9b", "pythia-6.9b", dict(NEOX, hidden_size=4096, num_hidden_layers=32,
        num_attention_heads=32, intermediate_size=16384, vocab_size=50432)),
    ("EleutherAI/pythia-12b", "pythia-12b", dict(NEOX, hidden_size=5120, num_hidden_layers=36,
        num_attention_heads=40, intermediate_size=20480, vocab_size=50688)),
    ("tiiuae/falcon-7b", "falcon-7b", {"model_type": "falcon", "architectures": ["FalconForCausalLM"],
        "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71, "multi_query": True,
        "parallel_attn": True, "bias": False, "new_decoder_architecture": False, "vocab_size": 65024,
        "torch_dtype": "bfloat16"}),
    ("tiiuae/falcon-40b", "falcon-40b", CORPUS + "Decentralised-AI__falcon-40b__config.json"),
    ("bigcode/starcoder", "starcoder", CORPUS + "Decentralised-AI__WizardCoder-15B-1.0-GPTQ__config.json"),
    ("bigcode/starcoder2-3b", "starcoder2-3b", dict(SC2, hidden_size=3072, num_hidden_layers=30,
        num_attention_heads=24, num_key_value_heads=2, intermediate_size=12288)),
    ("bigcode/starcoder2-7b", "starcoder2-7b", dict(SC2, hidden_size=4608, num_hidden_layers=32,
        num_attention_heads=36, num_key_value_heads=4, intermediate_size=18432)),
    ("bigcode/starcoder2-15b", "starcoder2-15b", dict(SC2, hidden_size=6144, num_hidden_layers=40,
        num_attention_heads=48, num_key_value_heads=4, intermediate_size=24576)),
    ("allenai/OLMo-2-1124-7B", "olmo-2-7b", {"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"],
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "intermediate_size": 11008, "vocab_size": 100352, "max_position_embeddings": 4096,
        "torch_dtype": "float32"}),
    ("allenai/OLMo-2-1124-13B", "olmo-2-13b", {"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"],
        "hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 40,
        "intermediate_size": 13824, "vocab_size": 100352, "max_position_embeddings": 4096,
        "torch_dtype": "float32"}),
    ("deepseek-ai/DeepSeek-V2-Lite", "deepseek-v2-lite", {"model_type": "deepseek_v2",
        "architectures": ["DeepseekV2ForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 27,
        "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": None, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 10944,
        "moe_intermediate_size": 1408, "n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2,
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "vocab_size": 102400, "max_position_embeddings": 163840,
        "torch_dtype": "bfloat16"}),
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3", AIC + "deepseek-ai--DeepSeek-V3_config.json"),
    ("deepseek-ai/DeepSeek-R1", "deepseek-r1", AIC + "deepseek-ai--DeepSeek-R1_config.json"),
    ("moonshotai/Kimi-K2-Instruct", "kimi-k2", AIC + "moonshotai--Kimi-K2-Instruct_config.json"),
    ("openai/gpt-oss-20b", "gpt-oss-20b", AIC + "openai--gpt-oss-20b_config.json"),
    ("openai/gpt-oss-120b", "gpt-oss-120b", AIC + "openai--gpt-oss-120b_config.json"),
    # the open bases teams fine-tune most (issue 28), each a published config.json kept as test data
    ("Qwen/Qwen1.5-0.5B-Chat", "qwen1.5-0.5b-chat", "data:Qwen__Qwen1.5-0.5B-Chat"),
    ("Qwen/Qwen1.5-1.8B-Chat", "qwen1.5-1.8b-chat", "data:Qwen__Qwen1.5-1.8B-Chat"),
    ("Qwen/Qwen1.5-4B-Chat", "qwen1.5-4b-chat", "data:Qwen__Qwen1.5-4B-Chat"),
    ("Qwen/Qwen1.5-7B", "qwen1.5-7b", "data:Qwen__Qwen1.5-7B"),
    ("Qwen/Qwen2-0.5B", "qwen2-0.5b", "data:Qwen__Qwen2-0.5B"),
    ("Qwen/Qwen2.5-3B-Instruct", "qwen2.5-3b-instruct", "data:Qwen__Qwen2.5-3B-Instruct"),
    ("01-ai/Yi-6B-Chat", "yi-6b-chat", "data:01-ai__Yi-6B-Chat"),
    ("deepseek-ai/deepseek-llm-7b-chat", "deepseek-llm-7b-chat", "data:deepseek-ai__deepseek-llm-7b-chat"),
    ("microsoft/phi-4", "phi-4", "data:microsoft__phi-4"),
    # transcribed from each HuggingFace repo's config.json (the keys that shape memory); each one's
    # parameter count, as transformers builds it, matches the size its model card publishes
    ("HuggingFaceTB/SmolLM2-135M", "smollm2-135m", dict(LLAMA, hidden_size=576, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536, vocab_size=49152,
        max_position_embeddings=8192, rope_theta=100000, tie_word_embeddings=True)),           # 135M
    ("HuggingFaceTB/SmolLM2-360M", "smollm2-360m", dict(LLAMA, hidden_size=960, num_hidden_layers=32,
        num_attention_heads=15, num_key_value_heads=5, intermediate_size=2560, vocab_size=49152,
        max_position_embeddings=8192, rope_theta=100000, tie_word_embeddings=True)),           # 362M
    ("HuggingFaceTB/SmolLM2-1.7B", "smollm2-1.7b", dict(LLAMA, hidden_size=2048, num_hidden_layers=24,
        num_attention_heads=32, num_key_value_heads=32, intermediate_size=8192, vocab_size=49152,
        max_position_embeddings=8192, rope_theta=130000, tie_word_embeddings=True)),           # 1.71B
    ("deepseek-ai/deepseek-coder-1.3b-base", "deepseek-coder-1.3b", dict(LLAMA, hidden_size=2048,
        num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16, intermediate_size=5504,
        vocab_size=32256, max_position_embeddings=16384, rope_theta=100000,
        rope_scaling={"type": "linear", "factor": 4.0})),                                       # 1.35B
    ("deepseek-ai/deepseek-coder-6.7b-base", "deepseek-coder-6.7b", dict(LLAMA, hidden_size=4096,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008,
        vocab_size=32256, max_position_embeddings=16384, rope_theta=100000,
        rope_scaling={"type": "linear", "factor": 4.0})),                                       # 6.74B
    ("deepseek-ai/deepseek-coder-33b-base", "deepseek-coder-33b", dict(LLAMA, hidden_size=7168,
        num_hidden_layers=62, num_attention_heads=56, num_key_value_heads=8, intermediate_size=19200,
        vocab_size=32256, max_position_embeddings=16384, rope_theta=100000,
        rope_scaling={"type": "linear", "factor": 4.0})),                                       # 33.3B
    ("deepseek-ai/deepseek-llm-67b-base", "deepseek-llm-67b", dict(LLAMA, hidden_size=8192,
        num_hidden_layers=95, num_attention_heads=64, num_key_value_heads=8, intermediate_size=22016,
        vocab_size=102400, max_position_embeddings=4096)),                                      # 67.4B
    ("01-ai/Yi-34B", "yi-34b", dict(LLAMA, hidden_size=7168, num_hidden_layers=60, num_attention_heads=56,
        num_key_value_heads=8, intermediate_size=20480, vocab_size=64000, max_position_embeddings=4096,
        rope_theta=5000000.0)),                                                                 # 34.4B
    ("01-ai/Yi-1.5-9B", "yi-1.5-9b", dict(LLAMA, hidden_size=4096, num_hidden_layers=48, num_attention_heads=32,
        num_key_value_heads=4, intermediate_size=11008, vocab_size=64000, max_position_embeddings=4096,
        rope_theta=5000000.0)),                                                                 # 8.83B
    ("mistralai/Mistral-Nemo-Base-2407", "mistral-nemo-12b", {"model_type": "mistral",
        "architectures": ["MistralForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336,
        "vocab_size": 131072, "max_position_embeddings": 1024000, "rope_theta": 1000000.0,
        "sliding_window": None, "torch_dtype": "bfloat16"}),                                    # 12.2B
    ("mistralai/Mistral-Small-24B-Base-2501", "mistral-small-24b", {"model_type": "mistral",
        "architectures": ["MistralForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 32768,
        "vocab_size": 131072, "max_position_embeddings": 32768, "rope_theta": 100000000.0,
        "sliding_window": None, "torch_dtype": "bfloat16"}),                                    # 23.6B
    ("Qwen/Qwen1.5-14B", "qwen1.5-14b", dict(QWEN15, hidden_size=5120, num_hidden_layers=40,
        num_attention_heads=40, num_key_value_heads=40, intermediate_size=13696)),              # 14.2B
    ("Qwen/Qwen1.5-32B", "qwen1.5-32b", dict(QWEN15, hidden_size=5120, num_hidden_layers=64,
        num_attention_heads=40, num_key_value_heads=8, intermediate_size=27392)),               # 32.5B
    ("Qwen/Qwen1.5-72B", "qwen1.5-72b", dict(QWEN15, hidden_size=8192, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=64, intermediate_size=24576)),              # 72.3B
    ("Qwen/Qwen2-1.5B", "qwen2-1.5b", dict(QWEN25, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
        num_key_value_heads=2, intermediate_size=8960, vocab_size=151936, tie_word_embeddings=True,
        rope_theta=1000000.0)),                                                                 # 1.54B
    ("Qwen/Qwen2-7B", "qwen2-7b", dict(QWEN25, hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, intermediate_size=18944, vocab_size=152064, rope_theta=1000000.0)),  # 7.62B
    ("Qwen/Qwen2-72B", "qwen2-72b", dict(QWEN25, hidden_size=8192, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, intermediate_size=29568, vocab_size=152064, rope_theta=1000000.0)),  # 72.7B
    ("Qwen/Qwen2-57B-A14B", "qwen2-57b-a14b", {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"],
        "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
        "intermediate_size": 18944, "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480,
        "num_experts": 64, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "vocab_size": 151936,
        "max_position_embeddings": 131072, "rope_theta": 1000000.0, "torch_dtype": "bfloat16"}),  # 57.4B
    # remote-code types read as the hand-modelled family whose tensors they have (hfconfig ALIASES),
    # each count matching its model card
    ("THUDM/chatglm3-6b", "chatglm3-6b", "data:THUDM__chatglm3-6b"),                            # 6.24B
    ("THUDM/glm-4-9b-chat", "glm-4-9b-chat", {"model_type": "chatglm", "architectures": ["ChatGLMModel"],
        "hidden_size": 4096, "ffn_hidden_size": 13696, "num_layers": 40, "num_attention_heads": 32,
        "multi_query_attention": True, "multi_query_group_num": 2, "kv_channels": 128, "padded_vocab_size": 151552,
        "seq_length": 131072, "add_qkv_bias": True, "add_bias_linear": False, "rmsnorm": True,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),                                 # 9.40B
    ("internlm/internlm2-7b", "internlm2-7b", {"model_type": "internlm2", "architectures": ["InternLM2ForCausalLM"],
        "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "vocab_size": 92544, "max_position_embeddings": 32768, "rope_theta": 1000000,
        "bias": False, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),                  # 7.74B
    ("internlm/internlm2-20b", "internlm2-20b", {"model_type": "internlm2", "architectures": ["InternLM2ForCausalLM"],
        "hidden_size": 6144, "intermediate_size": 16384, "num_attention_heads": 48, "num_hidden_layers": 48,
        "num_key_value_heads": 8, "vocab_size": 92544, "max_position_embeddings": 32768, "rope_theta": 1000000,
        "bias": False, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),                  # 19.86B
    ("baichuan-inc/Baichuan2-7B-Base", "baichuan2-7b", {"model_type": "baichuan",
        "architectures": ["BaichuanForCausalLM"], "hidden_size": 4096, "intermediate_size": 11008,
        "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 125696, "model_max_length": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),                                 # 7.51B
    ("baichuan-inc/Baichuan2-13B-Base", "baichuan2-13b", {"model_type": "baichuan",
        "architectures": ["BaichuanForCausalLM"], "hidden_size": 5120, "intermediate_size": 13696,
        "num_attention_heads": 40, "num_hidden_layers": 40, "vocab_size": 125696, "model_max_length": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"}),                                 # 13.90B
    ("internlm/internlm3-8b-instruct", "internlm3-8b", "data:internlm__internlm3-8b-instruct"),   # 8.80B
    ("openbmb/MiniCPM-2B-sft-bf16", "minicpm-2b", {"model_type": "minicpm", "architectures": ["MiniCPMForCausalLM"],
        "hidden_size": 2304, "intermediate_size": 5760, "num_attention_heads": 36, "num_key_value_heads": 36,
        "num_hidden_layers": 40, "vocab_size": 122753, "max_position_embeddings": 4096, "scale_emb": 12,
        "dim_model_base": 256, "scale_depth": 1.4, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}),  # 2.72B
]

# Other repos of an entry's architecture — instruction-tuned, chat, pre-trained and renamed
# releases — whose config.json matches the entry's in every key that shapes memory (they differ in
# chat tokens, ids, generation defaults). A name here resolves to the entry under its own name.
ALIASES: dict[str, tuple[str, ...]] = {
    "meta-llama/Llama-3.2-1B": ("meta-llama/Llama-3.2-1B-Instruct",),
    "meta-llama/Llama-3.2-3B": ("meta-llama/Llama-3.2-3B-Instruct",),
    "meta-llama/Llama-3.1-8B": ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B",
                                "meta-llama/Meta-Llama-3.1-8B-Instruct"),
    "meta-llama/Llama-3.1-70B": ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B",
                                 "meta-llama/Meta-Llama-3.1-70B-Instruct"),
    "meta-llama/Llama-3.1-405B": ("meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Meta-Llama-3.1-405B",
                                  "meta-llama/Meta-Llama-3.1-405B-Instruct"),
    "codellama/CodeLlama-7b-hf": ("codellama/CodeLlama-7b-Instruct-hf", "codellama/CodeLlama-7b-Python-hf"),
    "mistralai/Mistral-7B-v0.1": ("mistralai/Mistral-7B-Instruct-v0.1",),
    "mistralai/Mistral-7B-v0.3": ("mistralai/Mistral-7B-Instruct-v0.3",),
    "mistralai/Mixtral-8x7B-v0.1": ("mistralai/Mixtral-8x7B-Instruct-v0.1",),
    "mistralai/Mixtral-8x22B-v0.1": ("mistralai/Mixtral-8x22B-Instruct-v0.1",),
    "Qwen/Qwen2.5-0.5B": ("Qwen/Qwen2.5-0.5B-Instruct",),
    "google/gemma-2-2b": ("google/gemma-2-2b-it",),
    "google/gemma-2-9b-it": ("google/gemma-2-9b",),
    "google/gemma-2-27b-it": ("google/gemma-2-27b",),
    "google/gemma-3-1b-it": ("google/gemma-3-1b-pt",),
    "google/gemma-3-4b-it": ("google/gemma-3-4b-pt",),
    "google/gemma-3-12b-it": ("google/gemma-3-12b-pt",),
    "google/gemma-3-27b-it": ("google/gemma-3-27b-pt",),
    "deepseek-ai/DeepSeek-V2-Lite": ("deepseek-ai/DeepSeek-V2-Lite-Chat",),
    "deepseek-ai/DeepSeek-V3": ("deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3-Base"),
    "deepseek-ai/DeepSeek-R1": ("deepseek-ai/DeepSeek-R1-0528",),
    "meta-llama/Meta-Llama-3-8B-Instruct": ("meta-llama/Meta-Llama-3-8B",),      # VARIANTS below
    "meta-llama/Meta-Llama-3-70B-Instruct": ("meta-llama/Meta-Llama-3-70B",),
    "meta-llama/Llama-2-7b-hf": ("meta-llama/Llama-2-7b-chat-hf",),       # tests/data/hf_configs: same sizes
    "Qwen/Qwen1.5-0.5B-Chat": ("Qwen/Qwen1.5-0.5B",),       # the Chat configs differ from the bases' in eos only
    "Qwen/Qwen1.5-1.8B-Chat": ("Qwen/Qwen1.5-1.8B",),
    "Qwen/Qwen1.5-4B-Chat": ("Qwen/Qwen1.5-4B",),
    "Qwen/Qwen1.5-7B": ("Qwen/Qwen1.5-7B-Chat",),
    "Qwen/Qwen2.5-3B-Instruct": ("Qwen/Qwen2.5-3B",),
    "01-ai/Yi-6B-Chat": ("01-ai/Yi-6B",),
    "deepseek-ai/deepseek-llm-7b-chat": ("deepseek-ai/deepseek-llm-7b-base",),
    "google/gemma-7b": ("google/gemma-1.1-7b-it", "google/gemma-7b-it"),
    "google/gemma-2b": ("google/gemma-1.1-2b-it", "google/gemma-2b-it"),
    "deepseek-ai/deepseek-coder-1.3b-base": ("deepseek-ai/deepseek-coder-1.3b-instruct",),
    "deepseek-ai/deepseek-coder-6.7b-base": ("deepseek-ai/deepseek-coder-6.7b-instruct",),
    "deepseek-ai/deepseek-coder-33b-base": ("deepseek-ai/deepseek-coder-33b-instruct",),
    "deepseek-ai/deepseek-llm-67b-base": ("deepseek-ai/deepseek-llm-67b-chat",),
    "HuggingFaceTB/SmolLM2-135M": ("HuggingFaceTB/SmolLM2-135M-Instruct",),
    "HuggingFaceTB/SmolLM2-360M": ("HuggingFaceTB/SmolLM2-360M-Instruct",),
    "HuggingFaceTB/SmolLM2-1.7B": ("HuggingFaceTB/SmolLM2-1.7B-Instruct",),
    "mistralai/Mistral-Nemo-Base-2407": ("mistralai/Mistral-Nemo-Instruct-2407",),
    "mistralai/Mistral-Small-24B-Base-2501": ("mistralai/Mistral-Small-24B-Instruct-2501",),
    "Qwen/Qwen1.5-14B": ("Qwen/Qwen1.5-14B-Chat",),
    "Qwen/Qwen1.5-32B": ("Qwen/Qwen1.5-32B-Chat",),
    "Qwen/Qwen1.5-72B": ("Qwen/Qwen1.5-72B-Chat",),
    "01-ai/Yi-34B": ("01-ai/Yi-34B-Chat",),
    "01-ai/Yi-1.5-9B": ("01-ai/Yi-1.5-9B-Chat",),
    "internlm/internlm2-7b": ("internlm/internlm2-chat-7b", "internlm/internlm2_5-7b", "internlm/internlm2_5-7b-chat"),
    "internlm/internlm2-20b": ("internlm/internlm2-chat-20b",),
    "baichuan-inc/Baichuan2-7B-Base": ("baichuan-inc/Baichuan2-7B-Chat",),
    "baichuan-inc/Baichuan2-13B-Base": ("baichuan-inc/Baichuan2-13B-Chat",),
    "openbmb/MiniCPM-2B-sft-bf16": ("openbmb/MiniCPM-2B-dpo-bf16", "openbmb/MiniCPM-2B-sft-fp32"),
}

# llm-compressor's preset schemes, as RedHatAI's model cards give their recipes
# (QuantizationModifier(targets="Linear", scheme=..., ignore=["lm_head"])), saved by compressed-tensors
W4A16 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
         "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "weights": {
             "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}}}}
FP8_DYNAMIC = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
               "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                   "num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel"},
                   "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}
REDHAT = ("RedHatAI's re-upload of the model quantized with llm-compressor's {} scheme (Linear layers, "
          "lm_head kept); the architecture unchanged")

# Releases that differ from an entry in a key that shapes memory (vLLM's default max_model_len is
# max_position_embeddings; a window changes the KV cache): (id, short, entry, changed keys, evidence)
QWEN25_INSTRUCT = "the Instruct releases cap max_position_embeddings at 32768 (YaRN is opt-in)"
VARIANTS: list[tuple[str, str, str, dict, str]] = [
    ("Qwen/Qwen2.5-1.5B-Instruct", "qwen2.5-1.5b-instruct", "Qwen/Qwen2.5-1.5B",
        {"max_position_embeddings": 32768}, QWEN25_INSTRUCT),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B",
        {"max_position_embeddings": 32768}, QWEN25_INSTRUCT),
    ("Qwen/Qwen2.5-14B-Instruct", "qwen2.5-14b-instruct", "Qwen/Qwen2.5-14B",
        {"max_position_embeddings": 32768}, QWEN25_INSTRUCT),
    ("Qwen/Qwen2.5-32B-Instruct", "qwen2.5-32b-instruct", "Qwen/Qwen2.5-32B",
        {"max_position_embeddings": 32768}, QWEN25_INSTRUCT),
    ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b-instruct", "Qwen/Qwen2.5-72B",
        {"max_position_embeddings": 32768}, QWEN25_INSTRUCT),
    ("Qwen/Qwen3-32B", "qwen3-32b", "Qwen/Qwen3-32B-FP8", {"quantization_config": None},
        "the FP8 release is the bf16 model's weights quantized, the architecture unchanged"),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b-instruct", "meta-llama/Llama-3.1-8B",
        {"max_position_embeddings": 8192, "rope_scaling": None},
        "Llama 3 is Llama 3.1's architecture at 8k context, without llama3 RoPE scaling"),
    ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b-instruct", "meta-llama/Llama-3.1-70B",
        {"max_position_embeddings": 8192, "rope_scaling": None},
        "Llama 3 is Llama 3.1's architecture at 8k context, without llama3 RoPE scaling"),
    ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b-instruct-v0.2", "mistralai/Mistral-7B-v0.1",
        {"sliding_window": None, "rope_theta": 1000000.0},
        "v0.2 dropped v0.1's 4096-token sliding window for full attention over 32k (RoPE theta 1e6)"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "llama-3.1-8b-instruct-w4a16", "meta-llama/Llama-3.1-8B",
        {"quantization_config": W4A16, "torch_dtype": "float16"}, REDHAT.format("W4A16 (int4, fp16 scale per 128)")),
    ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "llama-3.3-70b-instruct-fp8-dynamic",
        "meta-llama/Llama-3.3-70B-Instruct", {"quantization_config": FP8_DYNAMIC},
        REDHAT.format("FP8_DYNAMIC (fp8 weights with a scale per output channel)")),
]


def load(shared: Path, source: object) -> tuple[dict, str]:
    if isinstance(source, tuple):       # a shared/ copy, with what the copy leaves out of the real file
        (raw, where), added = load(shared, source[0]), source[1]
        return {**raw, **added}, f"{where}; {', '.join(added)} transcribed from the HuggingFace repo's config.json"
    if isinstance(source, dict):
        return source, "transcribed from the HuggingFace repo's config.json"
    if str(source).startswith("groundtruth:"):
        name = str(source).split(":", 1)[1]
        for line in (shared / "groundtruth/h200-calibration.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record.get("model") == name:
                return record["config"], f"shared/groundtruth/h200-calibration.jsonl ({name}, measured on H200)"
        raise KeyError(name)
    if str(source).startswith("data:"):            # a published config kept in tests/data/hf_configs
        folder = str(source).split(":", 1)[1]
        path = Path(__file__).resolve().parent.parent / "tests" / "data" / "hf_configs" / folder / "config.json"
        return json.loads(path.read_text()), f"tests/data/hf_configs/{folder}/config.json (see its SOURCES.tsv)"
    if str(source).startswith("measure.py:"):      # a model measure.py measures that no record holds yet
        name = str(source).split(":", 1)[1]
        model_type, kwargs = models("measure.py", shared / "groundtruth")[name]
        return ({"model_type": model_type, **kwargs, "torch_dtype": "bfloat16"},
                f"shared/groundtruth/measure.py MODELS[{name!r}] (the released checkpoint's dimensions; its "
                "config.json's torch_dtype bfloat16)")
    return json.loads((shared / str(source)).read_text()), f"shared/{source} (see corpus/SOURCES.md)"


def variant(entries: list[dict], hf_id: str, short: str, base: str, changes: dict, evidence: str) -> dict:
    """A release of an entry's architecture whose config.json differs in a key that shapes memory
    (None removes the key); its own entry, with its own count."""
    source = next(e for e in entries if e["id"] == base)
    raw = {k: v for k, v in {**source["config"], **changes}.items() if v is not None}
    config, _ = text_config(dict(raw))
    params, _ = count_language_model(config) if "text_config" in raw else count(config)
    changed = ", ".join(f"{k}={v}" if not isinstance(v, dict) else f"its own {k}" for k, v in changes.items())
    entry = {"id": hf_id, "short": short, "params": params, "config": raw,
             "source": f"{base}'s config with {changed}: {evidence}"}
    if hf_id in ALIASES:
        entry["aliases"] = list(ALIASES[hf_id])
    return entry


def main(shared: str) -> None:
    entries = []
    for hf_id, short, source in ENTRIES:
        raw, where = load(Path(shared), source)
        raw = {k: v for k, v in raw.items() if k not in KEEP_OUT}
        config, _ = text_config(dict(raw))
        multimodal = "text_config" in raw or "vision_config" in raw
        params, _ = count_language_model(config) if multimodal else count(config)
        entry = {"id": hf_id, "short": short, "source": where, "params": params, "config": raw}
        if hf_id in ALIASES:
            entry["aliases"] = list(ALIASES[hf_id])
        entries.append(entry)
        print(hf_id, params, file=sys.stderr)
    for hf_id, short, base, changes, evidence in VARIANTS:
        entries.append(variant(entries, hf_id, short, base, changes, evidence))
        print(hf_id, entries[-1]["params"], file=sys.stderr)
    json.dump({"_about": "vramlint offline catalog; built by dev/build_catalog.py", "models": entries},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
