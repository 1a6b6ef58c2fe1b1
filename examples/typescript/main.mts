// The TypeScript client example (docs/clients.md): build the prompt an
// agent runs with, explain it, then produce the reviewers' decisions on
// the agent's work to precept's Redis stream, each carrying the prompt
// version, so precept can tell which rules were in force.
//
// Build and run (npm packages from `.ci/install-deps`):
//
//	npm run build --prefix clients/typescript
//	node examples/typescript/main.mjs   # the API token is read from $PRECEPT_TOKEN
//
// tsc writes main.mjs beside this file (an ES module, by its extension).
// It imports the client's compiled output by path, so the example needs
// no package of its own: the client's dependencies resolve from
// clients/typescript/node_modules.

import { parseArgs } from "node:util";

import {
  createClient,
  createPreceptTransport,
  DecisionProducer,
  DEFAULT_STREAM,
  errorText,
  PromptService,
  type BuildPromptResponse,
  type DecisionEvent,
  type ExplainPromptResponse,
} from "../../clients/typescript/dist/src/index.js";

const { values: flags } = parseArgs({
  options: {
    addr: { type: "string", default: process.env.PRECEPT_ADDR ?? "http://127.0.0.1:8080" },
    token: { type: "string", default: process.env.PRECEPT_TOKEN ?? "" },
    redis: { type: "string", default: process.env.PRECEPT_REDIS_ADDR ?? "127.0.0.1:6380" },
    stream: { type: "string", default: DEFAULT_STREAM },
    agent: { type: "string", default: "coding-agent" },
    stage: { type: "string", default: "implement" },
    path: { type: "string", default: "services/billing/api.go" },
    "id-prefix": { type: "string", default: `example-ts-${Date.now()}` },
  },
});

async function main(): Promise<void> {
  const prompts = createClient(PromptService, createPreceptTransport({ baseUrl: flags.addr!, token: flags.token }));
  const req = { agent: flags.agent!, stage: flags.stage!, scopePath: flags.path! };

  const built = await prompts.buildPrompt(req);
  printPrompt(req, built);
  const why = await prompts.explainPrompt(req);
  printExplanation(why);

  const producer = new DecisionProducer({ redis: flags.redis, stream: flags.stream });
  try {
    for (const ev of decisions(flags["id-prefix"]!, req, built.version)) {
      const entry = await producer.send(ev);
      console.log(`decision ${ev.decision_id} (${ev.decision} by ${ev.reviewer_id}) with prompt ${ev.prompt_version} sent as stream entry ${entry}`);
    }
  } finally {
    await producer.close();
  }
}

// decisions are what two reviewers decided about the agent's work.
function decisions(prefix: string, req: { agent: string; scopePath: string }, version: string): DecisionEvent[] {
  const now = new Date();
  const common = { gate_id: "HITL-2", agent: req.agent, timestamp: now, scope_path: req.scopePath, prompt_version: version };
  return [
    {
      ...common,
      decision_id: `${prefix}-1`,
      epic_id: "EPIC-7",
      decision: "REJECTED",
      reviewer_id: "reviewer-1",
      reviewer_comment: "The invoice total is a float64; amounts must be integer cents.",
      tags: ["money"],
      review_duration_seconds: 240,
    },
    { ...common, decision_id: `${prefix}-2`, epic_id: "EPIC-8", decision: "APPROVED", reviewer_id: "reviewer-2" },
  ];
}

function printPrompt(req: { agent: string; stage: string; scopePath: string }, p: BuildPromptResponse): void {
  console.log(`BuildPrompt agent ${req.agent}, stage ${req.stage}, path ${req.scopePath}`);
  console.log(`version  ${p.version}`);
  console.log(`commit   ${p.commit}`);
  console.log(`rules    ${p.ruleIds.length > 0 ? p.ruleIds.join(", ") : "(none)"}`);
  console.log("--- prompt");
  console.log(p.prompt);
  console.log("--- end of prompt");
}

function printExplanation(e: ExplainPromptResponse): void {
  console.log("ExplainPrompt");
  console.log(`version  ${e.version}`);
  console.log(`base     ${e.basePromptRef}`);
  console.log(`summary  ${e.summary}`);
  for (const f of e.rulesFiles) {
    console.log(`_rules.md ${f.path}: ${f.exists ? "exists" : "absent"}: ${f.reason}`);
  }
  for (const r of e.rules) {
    console.log(r.included ? `rule ${r.ruleId} in at position ${r.position}: ${r.reason}` : `rule ${r.ruleId} left out: ${r.reason}`);
  }
}

main().catch((err: unknown) => {
  console.error(`precept example: ${errorText(err)}`);
  process.exit(1);
});
