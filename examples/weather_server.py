"""A small modelctx server: the one the README demo runs.

    python examples/weather_server.py                      # stdio
    modelctx serve examples/weather_server.py              # stdio
    modelctx serve examples/weather_server.py --http       # http://127.0.0.1:8000/mcp
"""

from dataclasses import dataclass
from typing import Literal

from modelctx import Context, Server, ToolError

server = Server(
    "weather",
    version="1.0.0",
    instructions="Forecasts for a few cities. Call list_cities first.",
)

_CITIES = {"paris": (11.0, "rain"), "lisbon": (19.0, "sun"), "oslo": (-3.0, "snow")}


@dataclass
class Forecast:
    city: str
    temperature: float
    unit: Literal["C", "F"]
    sky: str


@server.tool(annotations={"readOnlyHint": True})
def list_cities() -> list[str]:
    """The cities this server knows."""
    return sorted(_CITIES)


@server.tool(annotations={"readOnlyHint": True})
async def forecast(city: str, unit: Literal["C", "F"] = "C", ctx: Context | None = None) -> Forecast:
    """Tomorrow's forecast for a city.

    Args:
        city: a city name, as list_cities gives it
        unit: C for Celsius, F for Fahrenheit
    """
    if ctx is not None:
        await ctx.report_progress(0.5, 1.0, "looking at the sky")
    known = _CITIES.get(city.lower())
    if known is None:
        raise ToolError(f"unknown city {city!r}; try one of {', '.join(sorted(_CITIES))}")
    temperature, sky = known
    if unit == "F":
        temperature = temperature * 9 / 5 + 32
    return Forecast(city.title(), temperature, unit, sky)


@server.resource("weather://cities", mime_type="application/json")
def cities() -> dict:
    """Every city with its current sky."""
    return {name: sky for name, (_, sky) in _CITIES.items()}


@server.prompt
def plan_trip(city: str) -> str:
    """Ask the model to plan a day around the weather."""
    return f"Check the forecast for {city} and plan a day outdoors or in."


if __name__ == "__main__":
    server.run()  # `python examples/weather_server.py` serves stdio, as `modelctx serve` does
