"""A scripted, OpenAI-compatible chat-completions server for tests, the offline eval and the demo."""

from calagent.scriptedmodel.demo import DEMO_SENTENCES, demo_script
from calagent.scriptedmodel.runner import ScriptedModelServer
from calagent.scriptedmodel.script import ErrorSpec, Match, Quirks, Response, Rule, Script, ToolCallSpec
from calagent.scriptedmodel.server import create_app
from calagent.scriptedmodel.state import RecordedRequest, ScriptedModelState

__all__ = [
    "DEMO_SENTENCES",
    "ErrorSpec",
    "Match",
    "Quirks",
    "RecordedRequest",
    "Response",
    "Rule",
    "Script",
    "ScriptedModelServer",
    "ScriptedModelState",
    "ToolCallSpec",
    "create_app",
    "demo_script",
]
