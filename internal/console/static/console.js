// The harness console's live updates: one EventSource on the page's
// stream (server-sent events from harness.events.>), no polling. A page
// without JavaScript still works; it just does not move by itself.
(function () {
  "use strict";
  var body = document.body;
  var url = body.dataset.live;
  var view = body.dataset.view;
  var badge = document.getElementById("live");
  if (!url || !window.EventSource) { return; }
  var es = new EventSource(url);
  es.onopen = function () { if (badge) { badge.hidden = false; badge.classList.remove("off"); badge.textContent = "live"; } };
  es.onerror = function () { if (badge) { badge.classList.add("off"); badge.textContent = "reconnecting"; } };

  // fetchInto replaces target's content with what url answers, one fetch
  // at a time; changes that arrive meanwhile fetch once more after it.
  function refresher(url, apply) {
    var busy = false, again = false;
    function run() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) { apply(html); } })
        .catch(function () {})
        .then(function () { busy = false; if (again) { again = false; run(); } });
    }
    return run;
  }

  if (view === "runs") {
    var tbody = document.getElementById("runs");
    var none = document.getElementById("none");
    var form = document.getElementById("filter");
    var wantState = form ? form.elements.state.value : "";
    var wantQuery = form ? form.elements.q.value.trim().toLowerCase() : "";
    es.addEventListener("run", function (e) {
      var m = JSON.parse(e.data);
      var match = (!wantState || m.status === wantState) && (!wantQuery || m.search.indexOf(wantQuery) >= 0);
      var old = document.getElementById("run-" + m.id);
      if (!match) { if (old) { old.remove(); } }
      else {
        var tpl = document.createElement("template");
        tpl.innerHTML = m.row.trim();
        var row = tpl.content.firstElementChild;
        row.classList.add("flash");
        if (old) { old.replaceWith(row); } else { tbody.insertBefore(row, tbody.firstChild); }
      }
      if (none) { none.hidden = tbody.children.length > 0; }
    });
  }

  if (view === "run") {
    var story = document.getElementById("story");
    var refresh = refresher(location.pathname + "/story", function (html) {
      story.innerHTML = html;
      var sec = story.querySelector("section.run");
      var cancel = document.getElementById("cancel");
      if (sec && cancel && sec.dataset.finished === "true") { cancel.hidden = true; }
    });
    es.addEventListener("change", refresh);
  }

  if (view === "approvals") {
    var list = document.getElementById("approvals");
    var notice = document.getElementById("approvals-notice");
    var refreshList = refresher("/approvals?fragment=1", function (html) {
      // A person halfway through a rewrite or a reason keeps what they typed.
      var a = document.activeElement;
      if (a && list.contains(a) && (a.tagName === "TEXTAREA" || a.tagName === "INPUT")) {
        notice.hidden = false;
        return;
      }
      list.innerHTML = html;
    });
    es.addEventListener("approvals", refreshList);
  }
})();
