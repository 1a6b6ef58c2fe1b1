package app

import (
	"strings"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/console"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// serveConsole mounts the web console at /ui/ (docs/console.md) unless
// ui.enabled is off. It calls the API's handlers in process, so it must
// come after every service is registered on the mux; it is told of rule
// and cluster changes so open pages reload.
func (a *App) serveConsole() error {
	ui := a.Config.UI
	if !ui.Enabled {
		return nil
	}
	creds, err := a.Config.Auth.Credentials()
	if err != nil {
		return err
	}
	auth, err := api.NewAuthenticator(creds)
	if err != nil {
		return err
	}
	c, err := console.New(console.Options{
		Auth:                   auth,
		API:                    a.mux,
		Redis:                  a.Redis,
		KeyPrefix:              a.Config.Redis.Stream + ":ui:",
		SessionIdle:            ui.SessionIdle,
		SessionMax:             ui.SessionMax,
		MaxSessionsPerIdentity: ui.MaxSessionsPerIdentity,
		MaxStreamsPerIdentity:  ui.MaxStreamsPerIdentity,
		SecureCookies:          ui.SecureCookies,
		CommitURL:              commitURL(a.Config.Rules.Git.WebURL),
		Log:                    a.Log.With("component", "console"),
	})
	if err != nil {
		return err
	}
	a.Console = c
	a.Rules.OnChange(func(rulefmt.Change) { c.Changed("rules") })
	if a.Evaluator != nil {
		a.OnEvaluatorChange(func(evaluator.Change) { c.Changed("clusters") })
	}
	a.Handle(console.Prefix, c)
	return nil
}

// commitURL is where the rules repository's web page shows a commit:
// forges (GitHub, Gitea, GitLab) answer <web_url>/commit/<sha>.
func commitURL(webURL string) string {
	if webURL == "" {
		return ""
	}
	return strings.TrimSuffix(webURL, "/") + "/commit/"
}
