package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

func (c *cli) promptClient() preceptv1connect.PromptServiceClient {
	return preceptv1connect.NewPromptServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
}

// promptTarget is what names a prompt: the flags every prompt command
// shares.
type promptTarget struct {
	agent, stage, path, baseFile string
}

func (t *promptTarget) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&t.agent, "agent", "", "agent name (required)")
	f.StringVar(&t.stage, "stage", "", "stage: selects prompts/<stage>.md (required)")
	f.StringVar(&t.path, "path", "", "path of the artifact the agent works on: selects the _rules.md files (a directory ends in /)")
	f.StringVar(&t.baseFile, "base-file", "", "use this file (- for stdin) as the base prompt instead of prompts/<stage>.md")
}

// check returns a usage error for missing flags and reads the base
// prompt file, if any.
func (t *promptTarget) check(c *cli, use string) (*string, error) {
	if t.agent == "" || t.stage == "" {
		return nil, usagef("%s needs --agent NAME and --stage STAGE", use)
	}
	if t.baseFile == "" {
		return nil, nil
	}
	var b []byte
	var err error
	if t.baseFile == "-" {
		b, err = io.ReadAll(c.stdin)
	} else {
		b, err = os.ReadFile(t.baseFile)
	}
	if err != nil {
		return nil, fmt.Errorf("read base prompt: %w", err)
	}
	s := string(b)
	return &s, nil
}

func (c *cli) promptCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "prompt", Short: "Build, explain and watch the stage prompts agents run with"}
	cmd.AddCommand(c.promptBuildCmd(), c.promptExplainCmd(), c.promptWatchCmd())
	return cmd
}

func (c *cli) promptBuildCmd() *cobra.Command {
	var t promptTarget
	var shadow bool
	cmd := &cobra.Command{
		Use:   "build --agent A --stage S [--path P]",
		Short: "Print the assembled prompt (its version and sources go to stderr)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := t.check(c, "build")
			if err != nil {
				return err
			}
			msg, err := call(c, cmd, c.promptClient().BuildPrompt, &preceptv1.BuildPromptRequest{
				Agent: t.agent, Stage: t.stage, ScopePath: t.path, BasePrompt: base})
			if err != nil {
				return err
			}
			m := msg
			if shadow && m.ShadowPrompt == "" {
				return fmt.Errorf("%s has no shadow rules: its shadow prompt is its prompt (version %s)", t.agent, m.Version)
			}
			return c.emit(m, func(w io.Writer) {
				text, version, label, ids := m.Prompt, m.Version, "rules", m.RuleIds
				if shadow {
					text, version, label, ids = m.ShadowPrompt, m.ShadowVersion, "shadow rules", m.ShadowRuleIds
				}
				io.WriteString(w, text)
				errw := cmd.ErrOrStderr()
				fmt.Fprintf(errw, "version %s from commit %s; %s: %s\n", version, orDash(short(m.Commit)), label, orDash(strings.Join(ids, ", ")))
				var out []string
				for _, x := range m.Excluded {
					out = append(out, x.RuleId+" ("+x.Reason+")")
				}
				if len(out) > 0 {
					fmt.Fprintf(errw, "left out: %s\n", strings.Join(out, ", "))
				}
			})
		},
	}
	t.flags(cmd)
	cmd.Flags().BoolVar(&shadow, "shadow", false, "print the shadow prompt (shadow rules ranked in) instead")
	return cmd
}

func (c *cli) promptExplainCmd() *cobra.Command {
	var t promptTarget
	cmd := &cobra.Command{
		Use:   "explain --agent A --stage S [--path P]",
		Short: "Say which rules and _rules.md files apply to an agent, stage and path, and why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := t.check(c, "explain")
			if err != nil {
				return err
			}
			msg, err := call(c, cmd, c.promptClient().ExplainPrompt, &preceptv1.ExplainPromptRequest{
				Agent: t.agent, Stage: t.stage, ScopePath: t.path, BasePrompt: base})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) { printExplanation(w, msg) })
		},
	}
	t.flags(cmd)
	return cmd
}

func printExplanation(w io.Writer, e *preceptv1.ExplainPromptResponse) {
	fields(w, "version", orDash(e.Version), "base", e.BasePromptRef, "summary", e.Summary)
	fmt.Fprintln(w)
	var rows [][]string
	for _, f := range e.RulesFiles {
		exists := "no"
		if f.Exists {
			exists = "yes"
		}
		rows = append(rows, []string{f.Path, exists, f.Reason})
	}
	table(w, []string{"_RULES.MD", "EXISTS", "WHY"}, rows)
	fmt.Fprintln(w)
	rows = nil
	for _, r := range e.Rules {
		pos := "-"
		if r.Included {
			pos = strconv.Itoa(int(r.Position))
		}
		rows = append(rows, []string{pos, r.RuleId, r.Status, r.Importance, fmt.Sprintf("%.2f", r.Confidence), clip(r.Content, 50), r.Reason})
	}
	table(w, []string{"POS", "RULE", "STATUS", "IMPORTANCE", "CONF", "TEXT", "WHY"}, rows)
}

func (c *cli) promptWatchCmd() *cobra.Command {
	var t promptTarget
	var last string
	var count int
	cmd := &cobra.Command{
		Use:   "watch --agent A --stage S [--path P]",
		Short: "Print a line for the current prompt, then one for each new version (JSON lines with -o json)",
		Long: "Watch prints the current prompt's version at once (reason \"initial\", or \"changed\" when it differs from --last-version),\n" +
			"then one line per new version until interrupted or --count lines are printed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := t.check(c, "watch")
			if err != nil {
				return err
			}
			if count < 0 {
				return usagef("--count must not be negative")
			}
			// No --timeout: a watch lasts until it is stopped.
			stream, err := c.promptClient().WatchPrompt(cmd.Context(), connect.NewRequest(&preceptv1.WatchPromptRequest{
				Agent: t.agent, Stage: t.stage, ScopePath: t.path, BasePrompt: base, LastVersion: last}))
			if err != nil {
				return err
			}
			defer stream.Close()
			for n := 0; count == 0 || n < count; n++ {
				if !stream.Receive() {
					if err := stream.Err(); err != nil {
						return err
					}
					return fmt.Errorf("the server ended the watch")
				}
				if err := c.printWatchLine(stream.Msg()); err != nil {
					return err
				}
			}
			return nil
		},
	}
	t.flags(cmd)
	cmd.Flags().StringVar(&last, "last-version", "", "the version seen last (from an earlier watch or build)")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many updates (0: until interrupted)")
	return cmd
}

func (c *cli) printWatchLine(m *preceptv1.WatchPromptResponse) error {
	if c.output == "json" {
		b, err := marshalJSON(m, false)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.stdout, string(b))
		return err
	}
	p := m.Prompt
	line := fmt.Sprintf("%s  %-7s  %s  commit %s  rules %s", time.Now().UTC().Format(time.RFC3339), m.Reason, p.GetVersion(),
		orDash(short(p.GetCommit())), orDash(strings.Join(p.GetRuleIds(), ",")))
	if p.GetShadowVersion() != "" {
		line += fmt.Sprintf("  shadow %s (%s)", p.GetShadowVersion(), strings.Join(p.GetShadowRuleIds(), ","))
	}
	_, err := fmt.Fprintln(c.stdout, line)
	return err
}
