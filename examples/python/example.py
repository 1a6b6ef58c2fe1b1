#!/usr/bin/python3
"""The Python client example (docs/clients.md): build the prompt an agent
runs with, explain it, then produce the reviewers' decisions on the
agent's work to precept's Redis stream, each carrying the prompt version,
so precept can tell which rules were in force.

    /usr/bin/python3 examples/python/example.py   # the API token is read from $PRECEPT_TOKEN

It needs the redis package (Debian's python3-redis, which
.ci/install-deps installs); /usr/bin/python3 is the Python that sees it.
"""

import argparse
import os
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

from precept_client import DEFAULT_STREAM, Client, DecisionProducer, PreceptError  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", default=os.environ.get("PRECEPT_ADDR", "http://127.0.0.1:8080"), help="preceptd base URL (env PRECEPT_ADDR)")
    p.add_argument("--token", default=os.environ.get("PRECEPT_TOKEN", ""), help="API bearer token (env PRECEPT_TOKEN)")
    p.add_argument("--redis", default=os.environ.get("PRECEPT_REDIS_ADDR", "127.0.0.1:6380"), help="Redis host:port (env PRECEPT_REDIS_ADDR)")
    p.add_argument("--stream", default=DEFAULT_STREAM)
    p.add_argument("--agent", default="coding-agent")
    p.add_argument("--stage", default="implement")
    p.add_argument("--path", default="services/billing/api.go")
    p.add_argument("--id-prefix", default=f"example-py-{time.time_ns() // 1_000_000}")
    args = p.parse_args()

    client = Client(args.addr, token=args.token)
    try:
        built = client.build_prompt(args.agent, args.stage, args.path)
        print_prompt(args, built)
        why = client.explain_prompt(args.agent, args.stage, args.path)
        print_explanation(why)

        producer = DecisionProducer(args.redis, stream=args.stream)
        try:
            for ev in decisions(args, built["version"]):
                entry = producer.send(ev)
                print(f"decision {ev['decision_id']} ({ev['decision']} by {ev['reviewer_id']}) with prompt {ev['prompt_version']} sent as stream entry {entry}")
        finally:
            producer.close()
    except PreceptError as err:
        print(f"precept example: {err}", file=sys.stderr)
        return 1
    return 0


def decisions(args, version):
    """What two reviewers decided about the agent's work."""
    common = {"gate_id": "HITL-2", "agent": args.agent, "timestamp": datetime.now(timezone.utc),
              "scope_path": args.path, "prompt_version": version}
    return [
        dict(common, decision_id=f"{args.id_prefix}-1", epic_id="EPIC-7", decision="REJECTED", reviewer_id="reviewer-1",
             reviewer_comment="The invoice total is a float64; amounts must be integer cents.", tags=["money"],
             review_duration_seconds=240),
        dict(common, decision_id=f"{args.id_prefix}-2", epic_id="EPIC-8", decision="APPROVED", reviewer_id="reviewer-2"),
    ]


# Responses are protobuf JSON: lowerCamelCase names, zero values left out.
def print_prompt(args, p):
    print(f"BuildPrompt agent {args.agent}, stage {args.stage}, path {args.path}")
    print(f"version  {p.get('version', '')}")
    print(f"commit   {p.get('commit', '')}")
    print(f"rules    {', '.join(p.get('ruleIds', [])) or '(none)'}")
    print("--- prompt")
    print(p.get("prompt", ""))
    print("--- end of prompt")


def print_explanation(e):
    print("ExplainPrompt")
    print(f"version  {e.get('version', '')}")
    print(f"base     {e.get('basePromptRef', '')}")
    print(f"summary  {e.get('summary', '')}")
    for f in e.get("rulesFiles", []):
        print(f"_rules.md {f.get('path', '')}: {'exists' if f.get('exists') else 'absent'}: {f.get('reason', '')}")
    for r in e.get("rules", []):
        if r.get("included"):
            print(f"rule {r.get('ruleId', '')} in at position {r.get('position', 0)}: {r.get('reason', '')}")
        else:
            print(f"rule {r.get('ruleId', '')} left out: {r.get('reason', '')}")


if __name__ == "__main__":
    sys.exit(main())
