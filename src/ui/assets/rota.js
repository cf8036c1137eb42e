// rota ui: keeps the page live without a framework. Every few seconds it asks for the
// server-rendered fragment of the same view (its filters and page) and swaps it in when it
// changed (keeping keyboard focus on the same link), and ticks the countdowns once a second. Without JavaScript the page still
// reads fine; it just does not refresh by itself.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = main && main.getAttribute("data-live");
  var liveText = document.getElementById("live-text");

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function left(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    if (h > 0) return h + "h" + pad(m) + "m";
    if (m > 0) return m + "m" + pad(s) + "s";
    return s + "s";
  }
  // The server's clock decides; the page only counts down from what the server rendered.
  // skew: the server's clock less the browser's, from each answer's Date header.
  var skew = 0;
  function tick() {
    var now = Date.now() + skew;
    var els = document.querySelectorAll(".countdown[data-until]");
    for (var i = 0; i < els.length; i++) {
      var until = Date.parse(els[i].getAttribute("data-until"));
      if (!isNaN(until)) els[i].textContent = left(until - now) + " left";
    }
  }
  function syncClock(r) {
    var server = Date.parse(r.headers.get("date") || "");
    if (!isNaN(server)) skew = server - Date.now();
  }
  // The moment the server's model was built (the "as of" stamp). A rebuild for the clock
  // that changed nothing else is answered 304 under the same ETag: only this moves.
  function asOf(r) {
    var at = Date.parse(r.headers.get("rota-as-of") || "");
    var t = main && main.querySelector(".updated time[datetime]");
    if (isNaN(at) || !t) return;
    var iso = new Date(at).toISOString();
    t.setAttribute("datetime", iso);
    t.textContent = iso.slice(0, 16).replace("T", " ") + " UTC";
  }

  // The server names the model a fragment came from (ETag); sent back, an unchanged model
  // is answered 304 with no body, so an open tab costs the server next to nothing.
  var last = null;
  var etag = main && main.getAttribute("data-etag");
  function refresh() {
    var headers = { "accept": "text/html" };
    if (etag) headers["if-none-match"] = etag;
    // The same filters and page as the address bar: a shared link stays live as it is.
    fetch(live + window.location.search, { headers: headers, cache: "no-store" })
      .then(function (r) {
        if (r.status !== 304 && !r.ok) throw new Error("HTTP " + r.status);
        syncClock(r);
        if (r.status === 304) {
          asOf(r);
          return null;
        }
        etag = r.headers.get("etag");
        return r.text();
      })
      .then(function (html) {
        if (liveText) liveText.textContent = "live";
        document.body.classList.remove("stale");
        if (html === null || html === last) return;
        last = html;
        var focused = document.activeElement;
        var href = focused && main.contains(focused) && focused.getAttribute("href");
        main.innerHTML = html;
        tick();
        if (href) {
          var again = main.querySelector('a[href="' + href.replace(/"/g, '\\"') + '"]');
          if (again) again.focus();
        }
      })
      .catch(function () {
        if (liveText) liveText.textContent = "disconnected, retrying";
        document.body.classList.add("stale");
      });
  }

  tick();
  setInterval(tick, 1000);
  if (live) {
    last = null;
    setInterval(refresh, 3000);
  }
})();
