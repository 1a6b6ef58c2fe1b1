// Package mcpserver serves precept over the Model Context Protocol
// (docs/mcp.md): tools for the assembled rules, their explanation,
// recording decisions and deciding proposals; the rules as resources
// (precept://rules/{agent}/{stage}) a client may subscribe to, and as
// prompts.
//
// Every tool, resource and prompt calls precept's Connect API through the
// generated clients, so the roles and policies are the API's: `precept
// mcp` runs it over stdio with the CLI's token against a remote preceptd,
// and preceptd serves it at /mcp, calling its own handlers in process
// with the caller's identity. The package holds no domain logic and links
// no server code.
package mcpserver
