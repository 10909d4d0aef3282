/**
 * The operator pages' one script, served by the app itself (`script-src 'self'`: no CDN, no
 * inline code). It follows the page's stream (stream.ts) and swaps each changed row in place,
 * prepends new audit-trail entries, offers newer operations without moving anything, and keeps
 * the "12s ago" times fresh. It writes the server's rows (escaped there, by the same function
 * that renders the page) and otherwise only text, never markup of its own built from data.
 * Without it the pages still work: they are complete as served, only not live.
 */
export const OPERATOR_VIEW_SCRIPT = `'use strict';
(function () {
  function ago(ms) {
    var s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + 's ago';
    if (s < 3600) return Math.floor(s / 60) + 'm ago';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm ago';
    return Math.floor(s / 86400) + 'd ago';
  }
  function refreshTimes(root) {
    var times = (root || document).querySelectorAll('time[data-ago]');
    for (var i = 0; i < times.length; i++) {
      var at = Date.parse(times[i].getAttribute('datetime'));
      if (!isNaN(at)) times[i].textContent = ago(Date.now() - at);
    }
  }
  function fromServer(html) {
    var template = document.createElement('template');
    template.innerHTML = html;
    return template.content.firstElementChild;
  }
  function start() {
    refreshTimes();
    setInterval(refreshTimes, 5000);
    var config = document.getElementById('live-config');
    var url = config && config.getAttribute('data-stream');
    if (!url || typeof EventSource === 'undefined') return;
    var live = document.getElementById('live');
    var source = new EventSource(url);
    source.onopen = function () {
      live.hidden = false;
      live.textContent = 'live';
      live.className = 'live on';
    };
    source.onerror = function () {
      live.hidden = false;
      live.textContent = 'reconnecting…';
      live.className = 'live';
    };
    source.addEventListener('row', function (event) {
      var data = JSON.parse(event.data);
      var rows = document.querySelectorAll('tr[data-operation-id]');
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute('data-operation-id') !== data.id) continue;
        var fresh = fromServer(data.html);
        if (fresh) {
          rows[i].replaceWith(fresh);
          refreshTimes(fresh);
        }
      }
    });
    source.addEventListener('audit', function (event) {
      var body = document.getElementById('audit-rows');
      var fresh = body && fromServer('<table><tbody>' + JSON.parse(event.data).html + '</tbody></table>');
      var row = fresh && fresh.querySelector('tr');
      if (!row) return;
      if (!body.querySelector('tr[data-event-id]')) body.textContent = '';
      body.insertBefore(row, body.firstChild);
      refreshTimes(row);
    });
    source.addEventListener('newer', function (event) {
      var count = JSON.parse(event.data).count;
      var notice = document.getElementById('newer');
      if (!notice) return;
      notice.hidden = count === 0;
      notice.querySelector('.n').textContent = String(count);
    });
    source.addEventListener('end', function () {
      live.textContent = 'reconnecting…';
      live.className = 'live';
    });
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
`;
