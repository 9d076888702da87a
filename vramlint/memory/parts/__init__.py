"""The memory model's shared pieces, which import no runtime: tensors and their components, the
caching-allocator model, weights, activations, the loss head, fixed costs, LoRA adapters and
quantized bases, the state pieces runtimes assemble, vLLM's LoRA slots and MXFP4 experts."""
