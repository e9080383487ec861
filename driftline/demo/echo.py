"""``python -m driftline.demo.echo``: the demo's engine stand-in, serving the demo's model names
(base + both adapters) from :mod:`serving.echo_engine` with a chosen TTFT and inter-token
latency, to run the story without vLLM (``driftline demo --engine echo``) or on a deliberately
slow engine (``--engine-ttft``)."""

from __future__ import annotations

import click
import uvicorn

from driftline.demo.story_config import BASE_MODEL
from serving.echo_engine import EchoEngineState, create_echo_engine

MODELS = (BASE_MODEL, "candidate-good", "candidate-bad")


@click.command()
@click.option("--port", type=int, required=True)
@click.option("--ttft-s", type=float, default=0.0, show_default=True, help="Seconds to 1st token.")
@click.option("--itl-s", type=float, default=0.02, show_default=True, help="Seconds per token.")
def main(port: int, ttft_s: float, itl_s: float) -> None:
    """Serve the echo engine on 127.0.0.1:PORT until SIGTERM."""
    state = EchoEngineState(models=MODELS, ttft_s=ttft_s, itl_s=itl_s)
    uvicorn.run(create_echo_engine(state), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
