// precept console: live updates. Pages work without this script. With
// it, a page whose body names topics in data-live reloads its content when
// the server reports a change in one of them (a proposal decided in Slack,
// a rule merged in git, clusters re-formed). It never throws away what the
// visitor typed: while any field differs from what the page was served
// with, it only says that the page has changed.
"use strict";

(function () {
  const topics = (document.body && document.body.dataset.live || "").split(" ").filter(Boolean);
  if (topics.length === 0 || !window.EventSource) {
    return;
  }
  // At most one reload per quiet period; changes in between make one
  // trailing reload.
  const quiet = 2000;
  let last = 0;
  let timer = null;
  let seq = 0;

  function status(text) {
    const el = document.querySelector("#main .live-status");
    if (el) {
      el.textContent = text;
    }
  }

  // edited reports whether a field of the page holds something the
  // visitor typed or chose.
  function edited() {
    const main = document.getElementById("main");
    if (!main) {
      return false;
    }
    for (const el of main.querySelectorAll("input, textarea, select")) {
      if (el.type === "hidden") {
        continue;
      }
      if (el.type === "checkbox" || el.type === "radio") {
        if (el.checked !== el.defaultChecked) {
          return true;
        }
      } else if (el.tagName === "SELECT") {
        for (const o of el.options) {
          if (o.selected !== o.defaultSelected) {
            return true;
          }
        }
      } else if (el.value !== el.defaultValue) {
        return true;
      }
    }
    return false;
  }

  async function reload() {
    timer = null;
    last = Date.now();
    if (edited()) {
      status("This page has changed since it was loaded; reload it to see the changes (what you typed is kept until then).");
      return;
    }
    const mine = ++seq;
    let res;
    try {
      res = await fetch(window.location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
    } catch (e) {
      return;
    }
    if (!res.ok || res.redirected || mine !== seq) {
      return;
    }
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    const fresh = doc.getElementById("main");
    const main = document.getElementById("main");
    if (!fresh || !main || mine !== seq || edited()) {
      return;
    }
    // Keep the keyboard focus on the same element when it is still there.
    const focused = document.activeElement && main.contains(document.activeElement) ? document.activeElement.id : "";
    main.innerHTML = fresh.innerHTML;
    if (focused) {
      const again = document.getElementById(focused);
      if (again) {
        again.focus();
      }
    }
    status("Updated at " + new Date().toLocaleTimeString() + ".");
    document.body.dataset.updated = String(Date.now());
  }

  function changed(topic) {
    if (!topics.includes(topic) || timer !== null) {
      return;
    }
    timer = setTimeout(reload, Math.max(0, last + quiet - Date.now()));
  }

  const events = new EventSource("/ui/events");
  events.addEventListener("change", function (e) { changed(e.data); });
})();
