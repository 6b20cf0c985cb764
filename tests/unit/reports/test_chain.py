"""What a chain of routes did, from per-route rows whose answer is known by hand."""

from locust_llm.reports.chain import chain_text, route_prices, routes_summary, routes_text

ROUTES = {"routes": [{"name": "xai", "prices": {"input_usd_per_mtok": 3.0}}, {"name": "vllm", "prices": None}]}


def row(route, step, users, **kw):
    base = {"route": route, "model": f"{route}-model", "step": step, "users": users, "requests": 0, "status_429": 0}
    return {**base, **kw}


STEPS = [
    row(
        "xai",
        1,
        8,
        requests=10,
        served=10,
        client_requests=10,
        client_ok=10,
        client_ttft_p99_ms=30.0,
        cost_usd=1.0,
        extra_cost_usd=0.0,
    ),
    row(
        "xai",
        2,
        64,
        requests=100,
        status_429=31,
        served=69,
        client_requests=100,
        client_ok=99,
        client_ttft_p99_ms=1900.0,
        cost_usd=10.0,
        extra_cost_usd=0.0,
    ),
    row("vllm", 2, 64, requests=31, served=31, cost_usd=1.2, extra_cost_usd=1.2),
]


def test_served_shares_extra_cost_and_the_primarys_client_figures_per_step():
    summary = routes_summary(STEPS, ROUTES, "xai")
    first, second = summary["steps"]
    assert first["served_share"] == {"xai": 1.0, "vllm": 0.0} and first["extra_cost_share"] == 0.0
    assert second["served_share"] == {"xai": 0.69, "vllm": 0.31}
    assert second["extra_cost_usd"] == 1.2 and second["extra_cost_share"] == 0.12  # 1.2 / (11.2 - 1.2)
    assert second["client_ok_share"] == 0.99 and second["status_429_share"] == {"xai": 0.31, "vllm": 0.0}
    text = routes_text(summary)
    assert text == "with fallback, client TTFT p99 at 64 users 1.90 s; 31% served by vllm; +12% cost"
    assert route_prices({"routes": ROUTES}) == {"xai": {"input_usd_per_mtok": 3.0}}


def test_without_prices_no_cost_is_claimed():
    steps = [{**s, "cost_usd": None, "extra_cost_usd": None} for s in STEPS]
    summary = routes_summary(steps, ROUTES, "xai")
    assert summary["steps"][1]["extra_cost_share"] is None
    assert routes_text(summary).endswith("31% served by vllm")


def test_compare_with_the_primary_alone_at_the_same_load():
    chain = {"routes": routes_summary(STEPS, ROUTES, "xai")}
    alone = {
        "model": "xai-model",
        "steps": [
            {
                "model": "xai-model",
                "route": "",
                "users": 64,
                "client_ttft_p99_ms": 7400.0,
                "client_requests": 100,
                "client_ok": 80,
            },
        ],
    }
    lines = chain_text(alone, chain)
    assert lines[0] == (
        "with fallback, client TTFT p99 at 64 users 1.90 s (primary alone: 7.40 s); 31% served by vllm; +12% cost"
    )
    assert lines[1] == "  64 users: client TTFT p99 1.90 s with the chain, 7.40 s alone; served 99% vs 80%"
