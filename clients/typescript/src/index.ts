// precept's TypeScript client (docs/clients.md): the Connect services
// generated from proto/ into ../gen (never edited by hand; `make
// generate` rewrites them), a transport that sends the API's bearer
// token, and a producer of decisions to the Redis stream in the format
// of docs/formats.md ("The decision event").

import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Redis } from "ioredis";

export * from "../gen/precept/v1/analytics_pb.js";
export * from "../gen/precept/v1/decision_pb.js";
export * from "../gen/precept/v1/effect_pb.js";
export * from "../gen/precept/v1/evaluator_pb.js";
export * from "../gen/precept/v1/export_pb.js";
export * from "../gen/precept/v1/feedback_pb.js";
export * from "../gen/precept/v1/impact_pb.js";
export * from "../gen/precept/v1/ping_pb.js";
export * from "../gen/precept/v1/prompts_pb.js";
export * from "../gen/precept/v1/rules_pb.js";
export { Code, ConnectError, createClient, type Client, type Transport };

/** Options of {@link createPreceptTransport}. */
export interface TransportOptions {
  /** preceptd's base URL, e.g. http://127.0.0.1:8080. */
  baseUrl: string;
  /** The API bearer token; none when the server has no tokens configured. */
  token?: string;
  /** How long one call may take, in milliseconds (default 10 s). */
  timeoutMs?: number;
}

/** bearer is an interceptor that sends the token as `Authorization: Bearer`. */
export function bearer(token: string): Interceptor {
  return (next) => async (req) => {
    req.header.set("Authorization", `Bearer ${token}`);
    return next(req);
  };
}

/**
 * createPreceptTransport returns a Connect transport (JSON over HTTP/1.1)
 * to preceptd. Pass it to createClient with a service, e.g.
 * `createClient(PromptService, transport)`.
 */
export function createPreceptTransport(opts: TransportOptions): Transport {
  return createConnectTransport({
    baseUrl: opts.baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: false,
    defaultTimeoutMs: opts.timeoutMs ?? 10_000,
    interceptors: opts.token ? [bearer(opts.token)] : [],
  });
}

/** errorText is one line for an error, naming the Connect code when there is one. */
export function errorText(err: unknown): string {
  if (err instanceof ConnectError) {
    return `${Code[err.code] ? codeName(err.code) : err.code}: ${err.rawMessage}`;
  }
  return err instanceof Error ? err.message : String(err);
}

// codeName writes a code as the Connect protocol does: "not_found".
function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

/** The stream producers write decisions to (redis.stream). */
export const DEFAULT_STREAM = "asdlc:events:hitl_decisions";

/**
 * DecisionEvent is one human decision at a HITL gate, with the fields of
 * docs/formats.md; the server validates them.
 */
export interface DecisionEvent {
  decision_id: string;
  gate_id: string;
  epic_id: string;
  task_id?: string;
  agent?: string;
  decision: "APPROVED" | "REJECTED" | "APPROVED_WITH_CHANGES";
  reviewer_id: string;
  /** RFC 3339, or a Date. */
  timestamp: string | Date;
  review_duration_seconds?: number;
  agent_output_sha?: string;
  approved_output_sha?: string;
  correction_diff_path?: string;
  correction_diff?: string;
  agent_output?: string;
  approved_output?: string;
  reviewer_comment?: string;
  tags?: string[];
  error_categories?: string[];
  scope_path?: string;
  /** The BuildPrompt version the reviewed output was made with. */
  prompt_version?: string;
  rating?: "positive" | "negative" | "skipped";
  quality_scores?: Record<string, number>;
}

/**
 * flatFields encodes an event as the stream's flat fields: every value a
 * string, lists and objects as JSON, numbers in decimal (whole numbers
 * only: a fraction, NaN or Infinity throws); absent and empty values are
 * left out.
 */
export function flatFields(ev: DecisionEvent): string[] {
  const out: string[] = [];
  for (const [name, value] of Object.entries(ev)) {
    if (value === undefined || value === null || value === "") {
      continue;
    }
    if (value instanceof Date) {
      out.push(name, value.toISOString());
    } else if (typeof value === "string") {
      out.push(name, value);
    } else if (typeof value === "number") {
      // A duration is whole seconds: a fraction, NaN or Infinity is
      // refused rather than cut (as the Python client does).
      if (!Number.isSafeInteger(value)) {
        throw new Error(`${name}: ${value} is not a whole number`);
      }
      out.push(name, String(value));
    } else {
      out.push(name, JSON.stringify(value));
    }
  }
  return out;
}

/** Options of {@link DecisionProducer}. */
export interface ProducerOptions {
  /** Redis as host:port or a redis:// URL (default 127.0.0.1:6380). */
  redis?: string;
  /** The stream (default asdlc:events:hitl_decisions). */
  stream?: string;
}

/**
 * DecisionProducer adds decisions to precept's Redis stream (XADD with
 * the flat fields). A Redis that cannot be reached fails the call instead
 * of queueing it.
 */
export class DecisionProducer {
  readonly stream: string;
  private readonly redis: Redis;
  private lastError: Error | undefined;

  constructor(opts: ProducerOptions = {}) {
    this.stream = opts.stream ?? DEFAULT_STREAM;
    let url = opts.redis ?? "127.0.0.1:6380";
    if (!url.includes("://")) {
      url = `redis://${url}`;
    }
    this.redis = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 5_000,
    });
    // Without a listener ioredis prints connection errors itself; send
    // reports them instead.
    this.redis.on("error", (err: Error) => {
      this.lastError = err;
    });
  }

  /** send adds one decision and returns its stream entry id. */
  async send(ev: DecisionEvent): Promise<string> {
    try {
      if (this.redis.status === "wait") {
        await this.redis.connect();
      }
      const id = await this.redis.xadd(this.stream, "*", ...flatFields(ev));
      if (id === null) {
        throw new Error("XADD returned no entry id");
      }
      return id;
    } catch (err) {
      const cause = this.lastError ?? err;
      throw new Error(`add decision ${ev.decision_id} to ${this.stream}: ${cause instanceof Error ? cause.message : String(cause)}`);
    }
  }

  /** close closes the connection to Redis. */
  async close(): Promise<void> {
    if (this.redis.status === "ready") {
      await this.redis.quit();
    } else {
      this.redis.disconnect();
    }
  }
}
