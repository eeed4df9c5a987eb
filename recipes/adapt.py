#!/usr/bin/env python3
"""Adapt a tokenwise-specialized checkpoint on GPUs: `tokenwise adapt`'s recipe in PyTorch.

`tokenwise specialize` prunes a model's vocabulary and adds merged domain tokens; the model
must then learn to read and write them. `tokenwise adapt` does that on the CPU, which is
right for a 135M model and too slow for a 4B one. This script is the same recipe on one or
more GPUs, with the same flags, the same data and the same output, so that
`tokenwise experiment --adapt-with "python3 recipes/adapt.py"` can use it in place of
`tokenwise adapt`:

  - data: JSONL {"prompt","completion"} (rendered in ChatML, the loss on the completion and
    its <|im_end|>) or {"text"} (trained whole, then <|endoftext|>), encoded with the
    checkpoint's own tokenizer.json by HF `tokenizers` (whose ids tokenwise matches);
  - trainable tensors: --trainable all, or a list of embed, head, norm, first, last, layer.N
    or name substrings (AdaptiVocab's default: embed,head,first,last); with --lora-rank R the
    other blocks' linear maps get LoRA adapters (PEFT), merged into the weights at the end;
  - AdamW (betas 0.9/0.95, eps 1e-8, decoupled weight decay on matrices only), global-norm
    clipping, linear warmup (steps/20) then a cosine to lr/10: train.Options' defaults;
  - float32 master weights, bf16 autocast on CUDA; the checkpoint written at --dtype with the
    input folder's config and tokenizer files, so every loader that read the input reads it;
  - --checkpoint-every N writes the weights and trainer-state.bin (the optimizer, schedule,
    step and data order) every N steps; --resume continues from them.

Several GPUs: `accelerate launch recipes/adapt.py ...` (data parallel; --batch stays the
global batch, split over the processes). What differs from `tokenwise adapt`: the data order
(torch's seeded permutation, not tokenwise's), and the arithmetic (bf16 products on a GPU),
so the two give close, not identical, weights.

  python3 recipes/adapt.py --model spec/ --corpus train.jsonl --eval validation.jsonl \\
      --steps 300 --batch 8 --seq-len 512 --out adapted/
"""

import argparse
import copy
import json
import math
import os
import random
import shutil
import sys
import time

import torch
from accelerate import Accelerator
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

END_OF_TURN = "<|im_end|>"
STATE = "trainer-state.bin"  # the name tokenwise adapt gives its resumable state
COPIED = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
          "vocab_map.json", "generation_config.json", "draft_index.bin"]


def chat_prompt(prompt):
    """train.ChatPrompt: the user turn in ChatML up to the assistant's turn."""
    return "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n"


def read_pairs(paths):
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"adapt: {path}:{n}: {e}")
                if "prompt" in rec and "completion" in rec:
                    out.append((rec["prompt"], rec["completion"]))
                elif "text" in rec:
                    out.append((None, rec["text"]))
                else:
                    sys.exit(f'adapt: {path}:{n}: want {{"prompt","completion"}} or {{"text"}}')
    if not out:
        sys.exit(f"adapt: no records in {paths}")
    return out


def encode(tok, pair, completion_only, max_len):
    """train.Encode: ids and which of them are targets."""
    prompt, completion = pair
    if prompt is None:
        ids = tok.encode(completion, add_special_tokens=False).ids
        eot = tok.token_to_id("<|endoftext|>")
        if eot is not None:
            ids.append(eot)
        mask = [True] * len(ids)
    else:
        ids = tok.encode(chat_prompt(prompt), add_special_tokens=False).ids
        n = len(ids)
        ids = ids + tok.encode(completion + END_OF_TURN, add_special_tokens=False).ids
        mask = [(i >= n) or not completion_only for i in range(len(ids))]
    if max_len > 0:
        ids, mask = ids[:max_len], mask[:max_len]
    return ids, mask


def trainable_predicate(spec, layers, tied):
    """cli.trainableFunc: --trainable as a test on parameter names (None: everything)."""
    if spec in ("", "all"):
        return None
    parts = []
    for p in (s.strip() for s in spec.split(",")):
        if p == "":
            continue
        elif p == "embed":
            parts.append("model.embed_tokens.")
        elif p == "head":
            parts.append("lm_head.")
            if tied:
                parts.append("model.embed_tokens.")
        elif p == "norm":
            parts.append("model.norm.")
        elif p == "first":
            parts.append("model.layers.0.")
        elif p == "last":
            parts.append(f"model.layers.{layers - 1}.")
        elif p.startswith("layer."):
            try:
                n = int(p[len("layer."):])
            except ValueError:
                n = -1
            if not 0 <= n < layers:
                sys.exit(f"adapt: --trainable {p!r}: want layer.N with 0 <= N < {layers}")
            parts.append(f"model.layers.{n}.")
        else:
            parts.append(p)
    return lambda name: any(p in name for p in parts)


def batches(data, batch, seed, epoch):
    """The epoch's seeded order, cut into batches (the last short one dropped when the data
    holds at least one full batch)."""
    order = list(range(len(data)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    cut = len(order) - len(order) % batch if len(order) >= batch else len(order)
    return [order[i:i + batch] for i in range(0, cut, batch)]


def collate(seqs, pad_id, device):
    n = max(len(ids) for ids, _ in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    labels = torch.full((len(seqs), n), -100, dtype=torch.long)
    attn = torch.zeros((len(seqs), n), dtype=torch.long)
    for r, (x, m) in enumerate(seqs):
        ids[r, :len(x)] = torch.tensor(x)
        attn[r, :len(x)] = 1
        # Position i predicts token i+1: the label of position i is ids[i+1] where that is
        # a target.
        for i in range(len(x) - 1):
            if m[i + 1]:
                labels[r, i] = x[i + 1]
    return ids.to(device), attn.to(device), labels.to(device)


def summed_loss(model, ids, attn, labels):
    """The sum of the target tokens' cross-entropies, and their count."""
    logits = model(input_ids=ids, attention_mask=attn).logits.float()
    ce = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1),
                                           ignore_index=-100, reduction="sum")
    return ce, (labels != -100).sum()


@torch.no_grad()
def held_out_loss(model, seqs, pad_id, device, acc, batch=8):
    model.eval()
    tot, cnt = torch.zeros((), device=device), torch.zeros((), device=device)
    mine = seqs[acc.process_index::acc.num_processes]
    for i in range(0, len(mine), batch):
        ids, attn, labels = collate(mine[i:i + batch], pad_id, device)
        with acc.autocast():
            s, c = summed_loss(model, ids, attn, labels)
        tot += s
        cnt += c
    tot, cnt = acc.reduce(tot, "sum"), acc.reduce(cnt, "sum")
    model.train()
    return (tot / cnt.clamp(min=1)).item()


def schedule(step, a):
    """train.Options.Schedule: linear warmup to lr, then a cosine down to min_lr."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    span = a.steps - a.warmup
    if span <= 1:
        return a.lr
    p = min((step - a.warmup) / (span - 1), 1.0)
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * p))


def save(model, src, out, dtype, tied, acc):
    """Writes out/model.safetensors at dtype (LoRA merged, the tied head left out as the
    input had it) and copies the input's config and tokenizer files."""
    acc.wait_for_everyone()
    if not acc.is_main_process:
        return
    m = acc.unwrap_model(model)
    if hasattr(m, "merge_and_unload"):
        # Merge a copy: the training model keeps its adapters for the steps still to come.
        m = copy.deepcopy(m).merge_and_unload()
    sd = {k: v.detach().to(dtype).contiguous().cpu() for k, v in m.state_dict().items()}
    if tied:
        sd.pop("lm_head.weight", None)
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, "model.safetensors.tmp")
    save_file(sd, tmp, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(out, "model.safetensors"))
    for name in COPIED:
        p = os.path.join(src, name)
        if os.path.exists(p):
            shutil.copyfile(p, os.path.join(out, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the specialized (or any) HF checkpoint folder")
    ap.add_argument("--corpus", action="append", required=True, help="training JSONL (repeat or comma-separate)")
    ap.add_argument("--eval", action="append", default=[], help="held-out JSONL for the loss before and after (default: the last 5%% of --corpus)")
    ap.add_argument("--eval-max", type=int, default=200)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--stop-at", type=int, default=0, help="stop after this many steps, the schedule still spanning --steps")
    ap.add_argument("--batch", type=int, default=8, help="sequences per step, over all processes")
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--min-lr", type=float, default=0)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--completion-only", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    ap.add_argument("--trainable", default="embed,head,first,last")
    ap.add_argument("--lora-rank", type=int, default=0, help="LoRA adapters of this rank on the blocks --trainable leaves frozen (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--checkpoint-every", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--precision", choices=["auto", "bf16", "f32"], default="auto",
                    help="products in bf16 autocast (float32 master weights) or float32; auto: bf16 on a GPU, f32 on a CPU")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads; 0: torch's default)")
    a = ap.parse_args()
    a.corpus = [p for c in a.corpus for p in c.split(",") if p]
    a.eval = [p for c in a.eval for p in c.split(",") if p]
    if a.steps < 1 or a.batch < 1 or a.accum < 1:
        sys.exit(f"adapt: --steps {a.steps}, --batch {a.batch}, --accum {a.accum}: want each >= 1")
    if a.warmup <= 0:
        a.warmup = max(a.steps // 20, 1)
    if a.min_lr <= 0:
        a.min_lr = a.lr / 10
    if a.threads > 0:
        torch.set_num_threads(a.threads)

    bf16 = a.precision == "bf16" or (a.precision == "auto" and torch.cuda.is_available())
    acc = Accelerator(mixed_precision="bf16" if bf16 else "no")
    if a.batch % acc.num_processes:
        sys.exit(f"adapt: --batch {a.batch} does not split over {acc.num_processes} processes")
    per = a.batch // acc.num_processes
    torch.manual_seed(a.seed)
    log = lambda *x: acc.is_main_process and print(*x, file=sys.stderr, flush=True)

    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    tied = bool(cfg.get("tie_word_embeddings", False))
    layers = int(cfg["num_hidden_layers"])
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    if tok.get_vocab_size(with_added_tokens=True) > cfg["vocab_size"]:
        sys.exit(f"adapt: tokenizer has {tok.get_vocab_size(with_added_tokens=True)} ids, the model's vocab_size is {cfg['vocab_size']}")
    seq_len = a.seq_len if 0 < a.seq_len <= cfg.get("max_position_embeddings", 1 << 30) else cfg.get("max_position_embeddings", 0)
    pairs = read_pairs(a.corpus)
    held = read_pairs(a.eval) if a.eval else []
    if not a.eval and len(pairs) >= 20:
        k = len(pairs) // 20
        held, pairs = pairs[-k:], pairs[:-k]
    held = held[:a.eval_max]
    enc = lambda ps: [s for s in (encode(tok, p, a.completion_only, seq_len) for p in ps) if any(s[1][1:])]
    data, held_seqs = enc(pairs), enc(held)
    if not data:
        sys.exit(f"adapt: no training sequence has a target token within --seq-len {seq_len}")
    pad_id = tok.token_to_id("<|endoftext|>") or 0

    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    pred = trainable_predicate(a.trainable, layers, tied)
    full = [n for n, _ in model.named_parameters() if pred is None or pred(n)]
    if pred is not None and not full:
        sys.exit(f"adapt: --trainable {a.trainable!r} matches no tensor")
    if a.lora_rank > 0:
        from peft import LoraConfig, get_peft_model
        frozen = [i for i in range(layers) if pred is not None and not any(f"model.layers.{i}." in n for n in full)]
        if frozen:
            lcfg = LoraConfig(r=a.lora_rank, lora_alpha=2 * a.lora_rank, lora_dropout=0.0, layers_to_transform=frozen,
                              target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
            model = get_peft_model(model, lcfg)
    for n, p in model.named_parameters():
        base = n.replace("base_model.model.", "").replace(".base_layer", "")
        p.requires_grad = "lora_" in n or base in full
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    n_train = sum(p.numel() for _, p in params)
    n_all = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in params if p.ndim >= 2 and "norm" not in n]
    no_decay = [p for n, p in params if not (p.ndim >= 2 and "norm" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    model, opt = acc.prepare(model, opt)
    dev = acc.device
    n_tok = sum(len(ids) for ids, _ in data)
    log(f"adapt: {cfg.get('model_type')} {layers} layers × {cfg['hidden_size']} hidden, {n_all} params ({n_train} trainable"
        f"{', LoRA rank %d' % a.lora_rank if a.lora_rank else ''}); {len(data)} sequences ({n_tok} tokens), {len(held_seqs)} held out;"
        f" {a.steps} steps × {a.batch * a.accum} sequences; {acc.num_processes} process(es) on {dev}")

    step, epoch, pos = 0, 0, 0
    state_path = os.path.join(a.out, STATE)
    if a.resume:
        if not os.path.exists(state_path):
            sys.exit(f"adapt: --resume: no {state_path}")
        st = torch.load(state_path, map_location="cpu", weights_only=False)
        if st["steps"] != a.steps or st["seed"] != a.seed:
            sys.exit(f"adapt: --resume: {state_path} is a run of {st['steps']} steps with seed {st['seed']}")
        acc.unwrap_model(model).load_state_dict(st["model"], strict=False)
        opt.load_state_dict(st["opt"])
        step, epoch, pos = st["step"], st["epoch"], st["pos"]
        log(f"continuing from step {step} ({state_path})")
    before = held_out_loss(model, held_seqs, pad_id, dev, acc) if held_seqs else None
    if before is not None:
        log(f"held-out loss before: {before:.4f}")

    order = batches(data, per * acc.num_processes, a.seed, epoch)
    stop = a.stop_at if 0 < a.stop_at < a.steps else a.steps
    start, first, toks, last = time.time(), step, 0, float("nan")
    trainable = [p for _, p in params]
    while step < stop:
        lr = schedule(step, a)
        for g in opt.param_groups:
            g["lr"] = lr
        tot, cnt = torch.zeros((), device=dev), torch.zeros((), device=dev)
        micro = []
        for _ in range(a.accum):
            if pos >= len(order):
                epoch, pos = epoch + 1, 0
                order = batches(data, per * acc.num_processes, a.seed, epoch)
            b = order[pos]
            pos += 1
            micro.append(b[acc.process_index * per:(acc.process_index + 1) * per] if len(b) >= acc.num_processes * per else b)
        # The loss is the mean over the step's target tokens, over every process and
        # micro-batch, as tokenwise's trainer takes it.
        n_targets = sum(sum(sum(m[1:]) for _, m in (data[i] for i in mb)) for mb in micro)
        n_targets = acc.reduce(torch.tensor(n_targets, device=dev, dtype=torch.float32), "sum")
        for mb in micro:
            ids, attn, labels = collate([data[i] for i in mb], pad_id, dev)
            with acc.autocast():
                s, c = summed_loss(model, ids, attn, labels)
            # DDP averages gradients over processes: scale so the sum is the global mean.
            acc.backward(s * acc.num_processes / n_targets)
            tot += s.detach()
            cnt += c
            toks += int(attn.sum())
        norm = acc.clip_grad_norm_(trainable, a.clip) if a.clip > 0 else torch.zeros(())
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        last = (acc.reduce(tot, "sum") / n_targets).item()
        if step == stop or step % max(1, a.steps // 50) == 0:
            log(f"step {step}/{a.steps} loss {last:.4f} lr {lr:.3g} grad norm {float(norm):.3f}")
        if a.checkpoint_every > 0 and (step % a.checkpoint_every == 0 or step == stop):
            save(model, a.model, a.out, torch.bfloat16 if a.dtype == "bf16" else torch.float32, tied, acc)
            if acc.is_main_process:
                m = acc.unwrap_model(model)
                torch.save({"model": {n: p.detach().cpu() for n, p in m.named_parameters() if p.requires_grad},
                            "opt": opt.state_dict(), "step": step, "epoch": epoch, "pos": pos,
                            "steps": a.steps, "seed": a.seed}, state_path + ".tmp")
                os.replace(state_path + ".tmp", state_path)
    el = time.time() - start
    save(model, a.model, a.out, torch.bfloat16 if a.dtype == "bf16" else torch.float32, tied, acc)
    toks = int(acc.reduce(torch.tensor(toks, device=dev), "sum"))
    if acc.is_main_process:
        # As tokenwise adapt: the steps this run took (a resumed run counts from its state).
        print(f"adapt: {step - first} steps in {round(el)}s ({toks / max(el, 1e-9):.0f} tokens/s), final train loss {last:.4f}")
    if held_seqs:
        after = held_out_loss(model, held_seqs, pad_id, dev, acc)
        if acc.is_main_process:
            print(f"held-out loss: {before:.4f} -> {after:.4f} ({len(held_seqs)} sequences)")
    if acc.is_main_process:
        print(f"checkpoint: {a.out}")


if __name__ == "__main__":
    main()
