#!/usr/bin/env python3
"""A real PyTorch streaming server for scripts/gpu_check.sh, shaped as simple Python LLM servers
are: an aiohttp event loop in front, and for each request an engine thread that runs a
random-weight GPT-2-size model (transformers' GPT2LMHeadModel, fp16 on the GPU, no download)
with a KV cache, greedy decoding, and hands each token to the loop with call_soon_threadsafe.
The endpoint streams one OpenAI-style SSE `data:` event per token, then `data: [DONE]`.

The `.item()` that fetches each sampled token waits for the GPU (cudaStreamSynchronize or a
synchronous copy inside libcudart/libcuda): that wait is the GPU's time; the rest of the step is
the model's Python and the kernel launches, holding the GIL.

Faults, off by default:
  --slow-every N --slow-matmuls K  every Nth step queues K more 8192x8192 fp16 matrix products
                                   (about 1.4 ms each on an H200): a GPU-bound slow step, as a
                                   bigger batch or a longer sequence makes
  --host-stall-every N --host-stall-ms MS
                                   every Nth step the engine thread spends MS in pure Python
                                   before launching (the GPU idles: a CPU-side stall)

--device cpu runs the same server on the CPU (to try the HTTP side where there is no GPU).
Prints "listening on 127.0.0.1:PORT" when ready (--port 0: a free port).
"""
import argparse
import asyncio
import json
import socket
import threading
import time

from aiohttp import web

ARGS = None
MODEL = None


def load_model(device):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=ARGS.layers, n_embd=ARGS.hidden, n_head=ARGS.heads, n_positions=4096)
    model = GPT2LMHeadModel(config).eval().to(device)
    if device != "cpu":
        model = model.half()
    return model


def python_stall(ms):
    """Pure-Python work holding the GIL: the CPU-side stall fault."""
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        for i in range(200):
            x += i * i
    return x


_BIG = None


def big_matrix():
    import torch

    global _BIG
    if _BIG is None:
        dtype = torch.float32 if ARGS.device == "cpu" else torch.float16
        _BIG = torch.full((8192, 8192), 1.0 / 8192, device=ARGS.device, dtype=dtype)
    return _BIG


def generate(prompt_tokens, max_tokens, emit):
    """The engine thread's loop: prefill, then one decode step per token, each ended by .item()."""
    import torch

    device = ARGS.device
    ids = torch.randint(0, MODEL.config.vocab_size, (1, max(1, prompt_tokens)), device=device)
    past = None
    with torch.inference_mode():
        for step in range(max_tokens):
            if ARGS.host_stall_every and step and step % ARGS.host_stall_every == 0:
                python_stall(ARGS.host_stall_ms)
            out = MODEL(input_ids=ids, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[:, -1, :]
            if ARGS.slow_every and step and step % ARGS.slow_every == 0:
                a = big_matrix()
                for _ in range(ARGS.slow_matmuls):
                    a = a @ a
                logits = logits + a[0, 0] * 0  # the sampled token depends on it: .item() waits
            token = int(logits.argmax(-1).item())  # waits for the GPU
            ids = torch.tensor([[token]], device=device)
            emit(step, token, step + 1 == max_tokens)


async def completions(request):
    body = await request.json()
    max_tokens = int(body.get("max_tokens") or ARGS.tokens)
    prompt = body.get("prompt")
    if prompt is None:
        prompt = " ".join(m.get("content", "") for m in body.get("messages", []))
    prompt_tokens = max(1, len(str(prompt).split()))
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    def emit(step, token, last):
        loop.call_soon_threadsafe(queue.put_nowait, (step, token, last))

    def engine():
        try:
            generate(prompt_tokens, max_tokens, emit)
        except Exception as e:  # the stream must end even if the model fails
            print(f"engine: {e!r}", flush=True)
            loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=engine, name="engine", daemon=True).start()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    while True:
        item = await queue.get()
        if item is None:
            break
        step, token, last = item
        chunk = {"choices": [{"text": f"t{token}", "index": 0, "finish_reason": "length" if last else None}]}
        data = json.dumps(chunk)
        await response.write(f"data: {data}\n\n".encode())
        if last:
            break
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def health(request):
    return web.Response(text="ok")


def main():
    global ARGS, MODEL
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--tokens", type=int, default=64, help="tokens when the body has no max_tokens")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--slow-every", type=int, default=0)
    p.add_argument("--slow-matmuls", type=int, default=150)
    p.add_argument("--host-stall-every", type=int, default=0)
    p.add_argument("--host-stall-ms", type=float, default=250)
    ARGS = p.parse_args()
    MODEL = load_model(ARGS.device)
    generate(8, 4, lambda *a: None)  # warm-up: CUDA context, kernels, allocator
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/health", health)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", ARGS.port))
    print(f"listening on 127.0.0.1:{sock.getsockname()[1]}", flush=True)
    web.run_app(app, sock=sock, print=None, handle_signals=True)


if __name__ == "__main__":
    main()
