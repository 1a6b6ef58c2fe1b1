// Package stream consumes HITL decision events from a Redis stream through
// a consumer group and hands the valid ones to a durable Sink
// (docs/formats.md).
//
// Delivery is at-least-once. An entry is acknowledged only after the sink
// reports it stored; the sink's idempotency on decision_id makes
// redelivery harmless; a decision_id sent again with other content is not
// a redelivery and is dead-lettered. Entries that cannot become a
// decision — undecodable, invalid, or delivered more than
// Options.MaxDeliveries times — are copied to a dead-letter stream and
// acknowledged in one MULTI/EXEC, so none is dropped silently and none is
// dead-lettered without being acknowledged (or the reverse). The copy is
// byte for byte up to Options.DeadLetterMaxBytes; a larger entry keeps its
// first bytes, its size and its SHA-256.
//
// One goroutine reads: first the entries a previous incarnation with the
// same consumer name left pending, then new entries, and every
// Options.ClaimInterval the entries of consumers that went quiet
// (XAUTOCLAIM). Up to Options.MaxInFlight batches are decoded, stored and
// acknowledged concurrently, each by its own goroutine running the one
// function that acknowledges entries.
//
// When the sink fails, the batch is retried from memory with backoff
// (250ms doubling to 5s) until it is stored or the consumer stops, and the
// reader waits meanwhile: an outage of the store delays ingestion but
// never dead-letters valid decisions, and entries keep their delivery
// count. Only real redeliveries — this consumer's pending entries re-read
// after a restart, or entries claimed from a consumer that went quiet —
// count toward MaxDeliveries, which is what catches a poison entry that
// keeps killing its consumer. Other failures of a batch (the dead-letter
// write, looking up delivery counts) make the reader back off and re-read
// its pending entries. Dead letters can be listed (Consumer.DeadLetters,
// in pages bounded in bytes), replayed onto the stream once their cause
// is fixed (ReplayDeadLetters) or dropped (DropDeadLetters); each replay
// and drop is recorded in an audit stream in the same transaction. The
// dead-letter stream is trimmed by age and length.
//
// With a Redis Cluster the stream and the dead-letter stream must hash to
// one slot (share a {hash tag}), because the dead-letter XADD and the XACK
// run in one transaction; New refuses names that do not.
package stream
