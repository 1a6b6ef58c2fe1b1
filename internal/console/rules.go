package console

import "net/http"

func (c *Console) ruleEffectChart(w http.ResponseWriter, r *http.Request, q *request) error {
	return newPageError(http.StatusNotImplemented, "not built yet")
}
