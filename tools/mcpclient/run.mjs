// Drives precept's MCP server with the TypeScript MCP SDK, a client
// precept did not write, for the interop test (internal/mcpserver,
// interop_test.go). It reads a JSON plan from argv[2], prints one JSON
// line per step to stdout, and waits on stdin: the test sends a line
// when it wants the next step. Secrets come from the environment.
//
// Plan: {transport: "stdio"|"http", url, precept, agent, stage, path,
// decision, pendingProposal}
// Environment: MCP_TOKEN (recorder), MCP_READER_TOKEN (reader).
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const plan = JSON.parse(process.argv[2]);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function emit(step, data) {
  process.stdout.write(JSON.stringify({ step, ...data }) + "\n");
}

async function next() {
  const { done } = await lines.next();
  if (done) throw new Error("stdin closed before the test asked for the next step");
}

function transportFor(token) {
  if (plan.transport === "stdio") {
    return new StdioClientTransport({
      command: plan.precept,
      args: ["--addr", plan.url, "mcp"],
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", PRECEPT_TOKEN: token },
      stderr: "inherit",
    });
  }
  return new StreamableHTTPClientTransport(new URL(plan.url + "/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}

async function connect(name, token) {
  const client = new Client({ name, version: "1.0.0" }, { capabilities: {} });
  await client.connect(transportFor(token));
  return client;
}

const agent = plan.agent, stage = plan.stage;
const uri = `precept://rules/${agent}/${stage}`;

const client = await connect("precept-interop", process.env.MCP_TOKEN);
const updated = new Promise((resolve) => {
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri));
});

const tools = await client.listTools();
emit("tools", { names: tools.tools.map((t) => t.name).sort(), schemas: Object.fromEntries(tools.tools.map((t) => [t.name, t.inputSchema])) });

const rules = await client.callTool({ name: "get_rules", arguments: { agent, stage } });
emit("get_rules", { isError: rules.isError ?? false, structured: rules.structuredContent, text: rules.content?.[0]?.text });

const recorded = await client.callTool({ name: "record_decision", arguments: plan.decision });
emit("record_decision", { isError: recorded.isError ?? false, structured: recorded.structuredContent, text: recorded.content?.[0]?.text });

const resource = await client.readResource({ uri });
emit("resource", { text: resource.contents[0].text, meta: resource.contents[0]._meta });

const scoped = await client.readResource({ uri: `${uri}?path=${encodeURIComponent(plan.path)}` });
emit("resource_path", { text: scoped.contents[0].text, meta: scoped.contents[0]._meta });

const prompt = await client.getPrompt({ name: "rules", arguments: { agent, stage } });
emit("prompt", { text: prompt.messages[0].content.text, description: prompt.description });

const reader = await connect("precept-interop-reader", process.env.MCP_READER_TOKEN);
const pending = await reader.callTool({ name: "list_proposals", arguments: {} });
emit("list_proposals", { isError: pending.isError ?? false, structured: pending.structuredContent });
const refused = await reader.callTool({ name: "approve_proposal", arguments: { proposal_id: plan.pendingProposal } });
emit("reader_approve", { isError: refused.isError ?? false, text: refused.content?.[0]?.text });
await reader.close();

await client.subscribeResource({ uri });
emit("subscribed", { uri });
await next();
const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no resources/updated within 60s")), 60000));
emit("updated", { uri: await Promise.race([updated, timeout]) });
await client.close();
process.exit(0);
