// precept console: live updates. Pages work without this script; with
// it, a page marked data-live reloads its content when the server reports
// a change (a proposal decided in Slack, a rule merged in git), unless
// the visitor is typing in one of its forms.
"use strict";

(function () {
  if (!document.body || document.body.dataset.live !== "true" || !window.EventSource) {
    return;
  }
  let pending = false;
  let typing = false;

  document.addEventListener("input", function () { typing = true; });

  function busy() {
    const el = document.activeElement;
    return typing && el && (el.tagName === "TEXTAREA" || el.tagName === "INPUT" || el.tagName === "SELECT");
  }

  async function reload() {
    if (busy()) {
      pending = true;
      return;
    }
    pending = false;
    const res = await fetch(window.location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
    if (!res.ok || res.redirected) {
      return;
    }
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    const fresh = doc.getElementById("main");
    const main = document.getElementById("main");
    if (!fresh || !main) {
      return;
    }
    main.innerHTML = fresh.innerHTML;
    const status = main.querySelector(".live-status");
    if (status) {
      status.textContent = "Updated at " + new Date().toLocaleTimeString() + ".";
    }
    document.body.dataset.updated = String(Date.now());
  }

  document.addEventListener("focusout", function () {
    setTimeout(function () {
      if (pending && !busy()) {
        reload();
      }
    }, 0);
  });

  const events = new EventSource("/ui/events");
  events.addEventListener("change", function () { reload(); });
})();
