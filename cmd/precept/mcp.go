package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/precept-dev/precept/internal/mcpserver"
)

// mcpCmd serves precept's MCP tools, resources and prompts over stdio for
// a local agent (docs/mcp.md), calling preceptd's API with the CLI's
// address and token: the token's role is what the agent may do.
func mcpCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve precept's rules and review tools to an agent over MCP (stdio)",
		Long: `Serve precept to a local agent over the Model Context Protocol on stdin and
stdout: tools (get_rules, explain_rules, record_decision, list_proposals,
get_proposal, approve_proposal, reject_proposal), the rules as resources
(precept://rules/{agent}/{stage}, subscribable) and prompts. Every call goes to
preceptd's API at --addr with --token, so the token's role decides what the
agent may do. Diagnostics go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s := mcpserver.New(mcpserver.NewClients(c.httpClient(), c.addr, c.clientOptions()...), mcpserver.Options{
				Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			defer s.Close()
			return s.RunStdio(cmd.Context())
		},
	}
}
