"""Which model API a command uses, and which model: the rules, in one place.

``choose_model(provider, model, environ)`` reads what a person sets for ``modelctx chat``
(``--provider``, ``--model``, the environment) and answers with a ``Model`` or a
``ModelSetupError`` that says, in flags and environment variables, what to set:

1. ``--provider`` names the API; without it, the API whose key is set
   (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``). With both keys set, the model name
   decides when it is clearly one provider's (``--model``, else ``MODELCTX_MODEL``);
   else Anthropic, and ``describe_model`` says so and how to choose the other. Both keys
   in one environment is common (a shell profile), so refusing would make every run
   name a provider; choosing silently would hide which bill a conversation goes to.
2. A provider named whose key is missing: that is the error, before anything else.
3. ``--model`` is used as given. ``MODELCTX_MODEL`` applies to Anthropic only when it is
   clearly an Anthropic model (``claude...``), and to the OpenAI-compatible API unless
   it is clearly Anthropic's (local servers serve any names: ``llama3.1``, ``qwen2.5``);
   otherwise it is an error naming the variable, not a request sent to the wrong API.
4. ``ANTHROPIC_BASE_URL`` and ``OPENAI_BASE_URL`` point the SDKs at another endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from ._model import Model, ModelSetupError

__all__ = ["NO_KEY_MESSAGE", "choose_model", "describe_model", "owner_of"]

Provider = Literal["anthropic", "openai"]

NO_KEY_MESSAGE = (
    "no model API key: set ANTHROPIC_API_KEY (Anthropic), or OPENAI_API_KEY and OPENAI_BASE_URL "
    "(an OpenAI-compatible or local model, with MODELCTX_MODEL or --model naming it)"
)

_KEYS: dict[Provider, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
_TITLES: dict[Provider, str] = {"anthropic": "Anthropic", "openai": "OpenAI-compatible"}
_OPENAI_NAMES = re.compile(r"^(gpt-|chatgpt-|o[1-9](-|$)|text-embedding-|davinci|babbage|ft:gpt-)", re.IGNORECASE)


def owner_of(model: str) -> Provider | None:
    """The provider a model name clearly belongs to, or None (a local or unknown name)."""
    if model.lower().startswith("claude"):
        return "anthropic"
    if _OPENAI_NAMES.match(model):
        return "openai"
    return None


def choose_model(provider: str | None, model: str | None, environ: Mapping[str, str]) -> Model:
    """The model the flags and ``environ`` configure (the rules are in this module's
    docstring); raises ``ModelSetupError`` saying which flag or variable to set."""
    env_model = environ.get("MODELCTX_MODEL") or None
    note: str | None = None
    if provider is None:
        chosen, note = _provider_from_keys(environ, model or env_model)
    elif provider in _KEYS:
        chosen = "anthropic" if provider == "anthropic" else "openai"
    else:
        raise ModelSetupError(f"--provider {provider} is not a provider: use --provider anthropic or --provider openai")
    key = _KEYS[chosen]
    if not environ.get(key):
        extra = " (any value for a local server that takes none)" if chosen == "openai" else ""
        raise ModelSetupError(f"--provider {chosen} needs {key}: export {key}=<your key>{extra}")
    name = model or _env_model_for(chosen, env_model)
    if chosen == "anthropic":
        from ._anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicModel

        made: Model = AnthropicModel(model=name or DEFAULT_ANTHROPIC_MODEL)
    else:
        if not name:
            raise ModelSetupError(
                "the OpenAI-compatible API needs a model name: pass --model NAME or export MODELCTX_MODEL=NAME "
                "(the name your endpoint serves, e.g. gpt-4o, or a local model such as llama3.1)"
            )
        from ._openai import OpenAIModel

        made = OpenAIModel(model=name)
    made.setup_note = note  # type: ignore[attr-defined]
    return made


def _provider_from_keys(environ: Mapping[str, str], name: str | None) -> tuple[Provider, str | None]:
    has = [provider for provider, key in _KEYS.items() if environ.get(key)]
    if not has:
        raise ModelSetupError(NO_KEY_MESSAGE)
    if len(has) == 1:
        return has[0], None
    owner = owner_of(name) if name else None
    if owner is not None:
        return owner, f"both API keys are set; {name} is an {_TITLES[owner]} model"
    return "anthropic", "both ANTHROPIC_API_KEY and OPENAI_API_KEY are set: --provider openai to use the other"


def _env_model_for(provider: Provider, env_model: str | None) -> str | None:
    if env_model is None:
        return None
    owner = owner_of(env_model)
    if provider == "anthropic" and owner != "anthropic":
        what = f"an {_TITLES[owner]} model" if owner else "not an Anthropic model (those start with 'claude')"
        raise ModelSetupError(
            f"MODELCTX_MODEL={env_model} is {what}, and the provider is anthropic: pass --model <an Anthropic "
            f"model> or --provider openai, or unset MODELCTX_MODEL"
        )
    if provider == "openai" and owner == "anthropic":
        raise ModelSetupError(
            f"MODELCTX_MODEL={env_model} is an Anthropic model, and the provider is openai: pass --model "
            f"<a model your OpenAI-compatible endpoint serves> or --provider anthropic, or unset MODELCTX_MODEL"
        )
    return env_model


def describe_model(model: Model) -> str:
    """One line for a banner: the model, its API and endpoint, and why it was chosen."""
    name = str(getattr(model, "model", "unknown"))
    provider = getattr(model, "provider", None)
    title = _TITLES["anthropic" if provider == "anthropic" else "openai"] if provider in _TITLES else "a custom model API"
    client = getattr(model, "client", None)
    base = getattr(client, "base_url", None)
    where = f" at {str(base).rstrip('/')}" if base is not None else ""
    note = getattr(model, "setup_note", None)
    return f"{name} ({title}{where}" + (f"; {note})" if note else ")")
