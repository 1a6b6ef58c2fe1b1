"""precept's Python client (docs/clients.md).

Client calls preceptd's API with Connect's JSON over HTTP, with the
standard library only: each RPC is a POST of a JSON object to
/<package>.<Service>/<Method>, and the answer is the response message in
protobuf's JSON mapping (lowerCamelCase names; fields at their zero value
left out). A failed call raises PreceptError carrying the Connect error
code ("unauthenticated", "not_found", ...) and the server's message.

DecisionProducer adds decisions to precept's Redis stream with the
`redis` package (Debian's python3-redis), in the flat encoding of
docs/formats.md ("Two encodings on the stream").
"""

import json
import urllib.error
import urllib.request
from datetime import datetime, timezone

__all__ = ["Client", "PreceptError", "DecisionProducer", "DEFAULT_STREAM", "flat_fields"]

DEFAULT_STREAM = "asdlc:events:hitl_decisions"

# The Connect code an HTTP status stands for when a reply carries no
# Connect error body (a proxy's answer, say), as the Connect protocol
# maps them.
_HTTP_CODES = {
    400: "internal",
    401: "unauthenticated",
    403: "permission_denied",
    404: "unimplemented",
    408: "deadline_exceeded",
    429: "unavailable",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


class PreceptError(Exception):
    """A failed call: the Connect error code and the server's message."""

    def __init__(self, code, message, http_status=None, procedure=""):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.http_status = http_status
        self.procedure = procedure


class Client:
    """A Connect JSON client of preceptd.

    base_url is preceptd's address (http://127.0.0.1:8080); token the API
    bearer token, or None when the server has no tokens configured.
    """

    def __init__(self, base_url="http://127.0.0.1:8080", token=None, timeout=10.0):
        self.base_url = base_url.rstrip("/")
        self.token = token or None
        self.timeout = timeout

    def call(self, service, method, request=None):
        """Calls one unary RPC, e.g. call("PromptService", "BuildPrompt",
        {"agent": "coding-agent", "stage": "implement"}), and returns the
        response as a dict."""
        procedure = f"/precept.v1.{service}/{method}"
        body = json.dumps(request or {}).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
            "Connect-Timeout-Ms": str(int(self.timeout * 1000)),
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base_url + procedure, data=body, headers=headers, method="POST")
        try:
            with _OPENER.open(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            if 300 <= err.code < 400:
                raise PreceptError("unknown", f"{procedure}: the server redirected to another URL; the client follows no redirect, "
                                   "so the token goes only to base_url: give the final URL", err.code, procedure) from None
            raise _error(err.code, err.read(), procedure) from None
        except urllib.error.URLError as err:
            raise PreceptError("unavailable", f"{procedure}: {err.reason}", None, procedure) from None
        except (TimeoutError, ConnectionError) as err:
            raise PreceptError("unavailable", f"{procedure}: {err}", None, procedure) from None

    def ping(self):
        """Who the token is: {"name": ..., "role": ...}."""
        return self.call("PingService", "Ping")

    def build_prompt(self, agent, stage, scope_path="", base_prompt=None):
        """The assembled prompt for an agent, stage and path, with its
        version, commit, sources and rule ids."""
        return self.call("PromptService", "BuildPrompt", _prompt_request(agent, stage, scope_path, base_prompt))

    def explain_prompt(self, agent, stage, scope_path="", base_prompt=None):
        """Which rules and _rules.md files apply, and why."""
        return self.call("PromptService", "ExplainPrompt", _prompt_request(agent, stage, scope_path, base_prompt))

    def get_feedback(self, decision_id):
        """A stored decision: {"decision": {...}, ...}; not_found until it is stored."""
        return self.call("FeedbackService", "GetFeedback", {"decision_id": decision_id})

    def record_feedback(self, decision):
        """Records a decision through the API (role recorder) instead of the stream."""
        return self.call("FeedbackService", "RecordFeedback", {"decision": decision})


def _prompt_request(agent, stage, scope_path, base_prompt):
    req = {"agent": agent, "stage": stage, "scope_path": scope_path}
    if base_prompt is not None:
        req["base_prompt"] = base_prompt
    return req


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: urllib would send the Authorization header
    on to whatever host the server names."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect())


def _error(status, body, procedure):
    """The error a failed reply stands for: the Connect error body when
    there is one, else the code of its HTTP status."""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and isinstance(doc.get("code"), str):
            return PreceptError(doc["code"], doc.get("message", ""), status, procedure)
    except ValueError:
        pass
    text = body.decode("utf-8", "replace").strip()[:200] or f"HTTP {status}"
    return PreceptError(_HTTP_CODES.get(status, "unknown"), text, status, procedure)


def flat_fields(event):
    """The stream's flat fields of a decision: every value a string,
    lists and objects as JSON, numbers in decimal, datetimes in RFC 3339;
    absent and empty values left out."""
    out = {}
    for name, value in event.items():
        if value is None or value == "":
            continue
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"{name}: a datetime without a time zone")
            out[name] = value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        elif isinstance(value, str):
            out[name] = value
        elif isinstance(value, bool):
            raise ValueError(f"{name}: a boolean is no field of a decision")
        elif isinstance(value, int):
            out[name] = str(value)
        elif isinstance(value, (list, dict)):
            out[name] = json.dumps(value)
        else:
            raise ValueError(f"{name}: cannot encode a {type(value).__name__}")
    return out


class DecisionProducer:
    """Adds decisions to precept's Redis stream.

    redis_addr is host:port or a redis:// URL; it needs the `redis`
    package (Debian's python3-redis), imported only here so the API
    client works without it.
    """

    def __init__(self, redis_addr="127.0.0.1:6380", stream=DEFAULT_STREAM, password=None):
        try:
            import redis
        except ImportError:
            raise ImportError(
                "DecisionProducer needs the redis package (Debian's python3-redis, which .ci/install-deps installs)"
            ) from None
        self._redis_errors = redis.RedisError
        url = redis_addr if "://" in redis_addr else f"redis://{redis_addr}"
        self.stream = stream
        self.redis = redis.Redis.from_url(url, password=password, socket_timeout=5, socket_connect_timeout=5)

    def send(self, event):
        """Adds one decision (a dict of the fields of docs/formats.md) and
        returns its stream entry id."""
        try:
            entry = self.redis.xadd(self.stream, flat_fields(event))
        except self._redis_errors as err:
            raise PreceptError("unavailable", f"add decision {event.get('decision_id')} to {self.stream}: {err}") from None
        return entry.decode() if isinstance(entry, bytes) else entry

    def close(self):
        self.redis.close()
