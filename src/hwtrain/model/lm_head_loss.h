// Fused LM head + cross-entropy: the mean cross entropy of softmax(x W^T) against targets,
// computed a chunk of tokens at a time, so the (tokens x vocab) logits, their log-softmax and
// their gradient never exist whole. With a 50k vocabulary those three fp32 copies are the largest
// tensors of a GPT-2 step (600 MiB at 1024 tokens); chunked, they are a few tens of MiB.
//
// When gradients are wanted, the forward pass also computes them (softmax - one-hot is known as
// soon as the logits are), so nothing is recomputed: the GEMMs are those of the unfused head, the
// gradients of x and W are kept until backward and scaled there by the incoming gradient (the loss
// is a scalar, so that scaling is exact, loss scaling included). This is the approach of Liger
// Kernel's fused linear cross-entropy, on LibTorch ops. The trainer's phase timing therefore counts
// the head's gradient GEMMs as forward time.
//
// Under autocast (or when compute_dtype is given) the GEMMs run in that dtype and the softmax in
// fp32, as autocast does for the unfused head. Targets equal to -1 are ignored.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace hwt {

// Tokens per chunk for a vocabulary of `vocab_size`: about 8 Mi logits (32 MiB in fp32) per chunk,
// at least 64 tokens so the GEMMs stay efficient.
int64_t lm_head_loss_chunk_tokens(int64_t vocab_size);

// x_NC: final hidden states (fp32 or the autocast dtype); weight_VC: the head (tied embedding);
// targets_N: int64 class ids or -1. chunk_tokens <= 0 picks lm_head_loss_chunk_tokens(V).
// compute_dtype: the GEMM dtype; nullopt = the CPU/CUDA autocast dtype if autocast is on for
// x's device, else fp32. Returns the mean loss over non-ignored targets (fp32 scalar).
torch::Tensor fused_lm_head_loss(const torch::Tensor& x_NC, const torch::Tensor& weight_VC,
                                 const torch::Tensor& targets_N, int64_t chunk_tokens = 0,
                                 std::optional<at::ScalarType> compute_dtype = std::nullopt);

}  // namespace hwt
