"""`planner serve`: simulate a deployment under load (planner/serve), print latency percentiles,
throughput, goodput, KV use, energy and cost; `--sweep-rate` prints the latency–throughput curve and
the highest rate within the SLOs, `--curve FILE.png` draws it. Without `--requests` a run goes on until
its latencies settle (planner/serve/steady.py); an open-loop rate above the deployment's saturation is
warned of, with `--requests` too."""

from __future__ import annotations

import argparse
import json

from planner.cli import progress
from planner.cli.args import finite_float, fmt_time, positive_int, precision_flags, precision_of
from planner.cli.names import DTYPES, PRICINGS
from planner.units import band_label, json_safe


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="simulate serving under load: TTFT/TPOT percentiles, goodput, cost",
                       description="Simulate an engine's continuous batching over predicted step times under an "
                                   "open-loop rate, closed-loop clients or a trace.")
    p.add_argument("model", help="zoo id or config.json path of a generative model")
    p.add_argument("--device", required=True, help="catalog device id or alias")
    p.add_argument("--gpus", type=positive_int, help="devices in the deployment (default tp x pp x dp)")
    for name, text in (("tp", "tensor-parallel degree"), ("pp", "pipeline stages"), ("ep", "expert-parallel degree")):
        p.add_argument(f"--{name}", type=positive_int, default=1, help=text)
    p.add_argument("--dp", type=positive_int, help="model copies (default gpus / (tp x pp))")
    p.add_argument("--engine", metavar="NAME", help="vllm (default on GPUs), sglang, trtllm; eager = static batches")
    p.add_argument("--dtype", choices=DTYPES, default="bf16")
    precision_flags(p)
    load = p.add_mutually_exclusive_group()
    load.add_argument("--rate", type=finite_float, metavar="RPS", help="open loop: requests per second")
    load.add_argument("--concurrency", type=positive_int, metavar="N", help="closed loop: N clients")
    load.add_argument("--trace", metavar="FILE", help="CSV or JSONL of arrival_s, input_len, output_len")
    p.add_argument("--requests", type=positive_int, help="requests to simulate (default: until the latencies settle, "
                                                         "or an overload's queue shows its growth; see docs/serving.md)")
    p.add_argument("--client", metavar="NAME", help="measure as this benchmark client runs a load: vllm-bench-serve, "
                   "sglang-bench-serving, genai-perf, aiperf, trtllm-bench, inferencemax (its request count, "
                   "lengths and ITL; hardware_specs/serving/clients.json)")
    p.add_argument("--range-ratio", type=finite_float, metavar="R", help="with --client: its --random-range-ratio")
    p.add_argument("--arrival", choices=("poisson", "gamma"), default="poisson")
    p.add_argument("--cv", type=finite_float, default=1.0, help="gamma arrivals: CV of the gaps (>1 bursty)")
    p.add_argument("--think-s", type=finite_float, default=0.0, help="closed loop: pause between requests, s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--input-len", type=positive_int, help="prompt tokens (default 1024)")
    p.add_argument("--output-len", type=positive_int, default=256, help="output tokens (default 256)")
    p.add_argument("--lengths", metavar="PRESET", help="lengths drawn from a preset (hardware_specs/serving/"
                                                       "lengths.csv), e.g. sharegpt")
    p.add_argument("--batch", type=positive_int, help="static batching (--engine eager): requests per batch")
    p.add_argument("--max-num-seqs", type=positive_int, help="override the engine's sequence limit")
    p.add_argument("--max-num-batched-tokens", type=positive_int, help="override the engine's token budget per step")
    p.add_argument("--prefix-hit-rate", type=finite_float, default=0.0, help="share of each prompt in the prefix cache")
    p.add_argument("--recv-interval", type=positive_int, metavar="N",
                   help="SGLang --scheduler-recv-interval: new requests taken every N decode steps (default 1)")
    p.add_argument("--batch-wait-iters", type=int, metavar="T",
                   help="TensorRT-LLM batch_wait_timeout_iters: steps new prompts may be held back (default 0: off)")
    p.add_argument("--batch-wait-tokens-ratio", type=finite_float, metavar="R",
                   help="TensorRT-LLM batch_wait_max_tokens_ratio: share of the step budget that ends the wait")
    p.add_argument("--disagg", metavar="XpYd", help="disaggregated prefill/decode copies, e.g. 1p1d")
    p.add_argument("--slo-ttft", type=finite_float, metavar="S", help="TTFT objective, s")
    p.add_argument("--slo-tpot", type=finite_float, metavar="S", help="TPOT objective, s")
    p.add_argument("--slo-stat", choices=("mean", "p50", "p90", "p99"), default="p90",
                   help="statistic the SLOs bind (default p90)")
    p.add_argument("--sweep-rate", type=positive_int, nargs="?", const=10, metavar="POINTS",
                   help="latency-throughput curve over POINTS rates (default 10) and the highest rate within SLOs")
    p.add_argument("--curve", metavar="FILE.png", help="with --sweep-rate: draw p50/p90 TTFT against throughput")
    p.add_argument("--power-limit-w", type=finite_float, metavar="W", help="device power limit below its TDP")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--instance", help="cloud instance to price on (default: the cheapest with the device)")
    where.add_argument("--site", help="on-prem site id to price on (TCO)")
    p.add_argument("--pricing", choices=PRICINGS, default="on_demand")
    p.add_argument("--utilization", type=float, default=1.0, help="on-prem: share of hours doing useful work")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_serve)


def _inputs(args: argparse.Namespace):
    from planner.predict.api import Request
    from planner.serve.api import Load, Scheduling, Slo

    req = Request(model=args.model, device=args.device, gpus=args.gpus, tp=args.tp, pp=args.pp, dp=args.dp,
                  ep=args.ep, batch=args.batch or 1, input_len=args.input_len, output_len=args.output_len,
                  dtype=precision_of(args), instance=args.instance, site=args.site, pricing=args.pricing,
                  utilization=args.utilization, engine=args.engine, power_limit_w=args.power_limit_w)
    load = Load(rate_rps=args.rate, concurrency=args.concurrency, trace=args.trace, requests=args.requests,
                arrival=args.arrival, cv=args.cv, lengths=args.lengths, think_s=args.think_s, seed=args.seed,
                client=args.client, range_ratio=args.range_ratio)
    scheduling = Scheduling(args.max_num_seqs, args.max_num_batched_tokens, args.prefix_hit_rate, args.disagg,
                            args.recv_interval, args.batch_wait_iters, args.batch_wait_tokens_ratio)
    return req, load, scheduling, Slo(args.slo_ttft, args.slo_tpot, args.slo_stat)


def _ms(x: float | None) -> str:
    return "-" if x is None else fmt_time(x)


def print_result(r) -> None:
    """The text report of one ServeResult."""
    m = r.metrics
    print(f"model          {r.model} on {r.gpus} x {r.device} (tp {r.tp}, {r.copies} "
          f"cop{'y' if r.copies == 1 else 'ies'}), engine {r.engine}")
    print(f"scheduler      {r.policy}")
    print(f"load           {r.load}")
    print(f"tier           {r.tier} (band {band_label(r.band_fraction)})")
    if r.band_basis:
        print(f"band from      {r.band_basis}")
    print(f"{'':<14} {'mean':>10} {'p50':>10} {'p90':>10} {'p99':>10}")
    for name in ("ttft", "tpot", "itl", "e2e"):
        p = getattr(m, f"{name}_s")
        print(f"{name.upper():<14} {_ms(p.mean):>10} {_ms(p.p50):>10} {_ms(p.p90):>10} {_ms(p.p99):>10}")
    print(f"throughput     {m.output_tokens_per_s:,.0f} output tokens/s, {m.total_tokens_per_s:,.0f} total tokens/s, "
          f"{m.requests_per_s:.2f} requests/s over {fmt_time(m.duration_s)}")
    if m.goodput_rps is not None:
        print(f"goodput        {m.goodput_rps:.2f} requests/s within the SLOs ({m.slo_met_fraction:.1%} of requests)")
    print(f"KV cache       {m.kv_mean_fraction:.0%} in use on average, {m.kv_peak_fraction:.0%} at peak "
          f"({r.kv_blocks_per_copy:,} blocks of {r.kv_block_tokens} tokens per copy); {m.preemptions:,} preemptions")
    print(f"concurrency    {m.mean_concurrency:.1f} requests in the system on average (Little's law within "
          f"{m.little_error:.2%})")
    if r.j_per_output_token is not None:
        print(f"energy         {r.j_per_output_token:.3f} J per output token, {r.average_power_w_per_gpu:.0f} W per GPU")
    if r.usd_per_million_output_tokens is not None:
        print(f"cost           ${r.usd_per_h:,.2f}/h, ${r.usd_per_million_output_tokens:,.3f} per 1M output tokens")
    for warning in r.warnings:
        print(f"warning        {warning}")
    for note in r.notes:
        print(f"note           {note}")


def _sweep(args, req, load, scheduling, slo) -> int:
    from planner.serve.sweep import sweep

    if args.curve:
        from planner.plot import check_target
        check_target(args.curve, "--curve")
    progress.step(f"simulating {args.sweep_rate} rates and the saturation")
    curve, capacity = sweep(req, load, scheduling, slo, args.sweep_rate)
    progress.done()
    slos = slo.ttft_s is not None or slo.tpot_s is not None
    if args.json:
        out = {"saturation_rps": capacity.saturation_rps,
               "max_rate_within_slo_rps": capacity.rate_rps if slos else None,
               "capped_at_saturation": capacity.capped if slos else None,
               "curve": [{"rate_rps": rate, **run.as_dict()} for rate, run in curve]}
        for point in out["curve"]:
            point.pop("timeline")
        print(json.dumps(json_safe(out), indent=2, default=str, allow_nan=False))
    else:
        first = curve[0][1]
        print(f"model          {first.model} on {first.gpus} x {first.device} (tp {first.tp}), engine {first.engine}")
        print(f"scheduler      {first.policy}")
        print(f"saturation     {capacity.saturation_rps:.2f} requests/s with every copy full (closed loop)")
        print(f"{'rate/s':>8} {'out tok/s':>10} {'TTFT p50':>10} {'TTFT p90':>10} {'TPOT p50':>10} {'TPOT p90':>10} "
              f"{'goodput/s':>10}")
        for rate, run in curve:
            m = run.metrics
            good = "-" if m.goodput_rps is None else f"{m.goodput_rps:.2f}"
            over = "  overloaded" if run.overloaded else ""
            print(f"{rate:>8.2f} {m.output_tokens_per_s:>10,.0f} {_ms(m.ttft_s.p50):>10} {_ms(m.ttft_s.p90):>10} "
                  f"{_ms(m.tpot_s.p50):>10} {_ms(m.tpot_s.p90):>10} {good:>10}{over}")
        if any(run.overloaded for _, run in curve):
            print(f"overloaded     above {capacity.saturation_rps:.2f} requests/s the queue grows without bound: such "
                  "a row is of a finite run and never counts as within the SLOs")
        if slos:
            cap = (f"; capped at saturation: every rate tried up to {capacity.saturation_rps:.2f} requests/s meets "
                   "the SLOs") if capacity.capped else ""
            print(f"within SLOs    {capacity.rate_rps:.2f} requests/s at most ({slo.stat} TTFT "
                  f"{_ms(slo.ttft_s)}, {slo.stat} TPOT {_ms(slo.tpot_s)}){cap}")
    if args.curve:
        from planner.plot import draw_curve

        stat = slo.stat if slo.stat != "mean" else "p90"
        series = [(f"TTFT {s}", [(run.metrics.output_tokens_per_s, getattr(run.metrics.ttft_s, s) or 0.0)
                                 for _, run in curve]) for s in ("p50", stat if stat != "p50" else "p99")]
        first = curve[0][1]
        draw_curve(args.curve, series, "output tokens/s", "TTFT (s)",
                   f"{first.model} on {first.gpus} x {first.device}, {first.engine}: TTFT vs throughput",
                   slo.ttft_s, f"SLO: {slo.stat} TTFT {_ms(slo.ttft_s)}" if slo.ttft_s else "SLO")
        if not args.json:
            print(f"curve          written to {args.curve}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    saturation_first = not args.sweep_rate and args.rate is not None and args.requests is not None and not args.disagg
    progress.step("importing", of=2 + saturation_first)
    from planner.cli import imported
    from planner.errors import ConfigError
    from planner.serve.api import serve

    imported()
    req, load, scheduling, slo = _inputs(args)
    if args.sweep_rate:
        return _sweep(args, req, load, scheduling, slo)
    if args.curve:
        raise ConfigError("--curve needs --sweep-rate")
    saturation = None
    if saturation_first:
        from planner.serve.sweep import saturation_rate

        progress.step("finding the saturation rate")
        saturation = saturation_rate(req, load, scheduling)  # the overload warning of a stated request count
    progress.step("counting the model's graphs and simulating")
    result = serve(req, load, scheduling, slo, saturation_rps=saturation)
    progress.done()
    if args.json:
        print(json.dumps(json_safe(result.as_dict()), indent=2, default=str, allow_nan=False))
        return 0
    print_result(result)
    return 0
