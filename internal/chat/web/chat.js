// wo chat: the browser side of the JSON protocol in docs/chat.md.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const log = $("log"), status = $("status"), text = $("text"), say = $("say");
  let sock = null, joined = "";

  function line(f) {
    const div = document.createElement("div");
    div.className = "line " + (f.type === "message" ? (f.history ? "history" : "message") : f.type);
    const room = document.createElement("span");
    room.className = "room";
    room.textContent = f.room === "*" ? "*" : "#" + f.room;
    div.appendChild(room);
    if (f.history && f.at) {
      const when = document.createElement("span");
      when.className = "when";
      when.textContent = new Date(f.at).toLocaleTimeString();
      div.appendChild(when);
    }
    const nick = document.createElement("span");
    nick.className = "nick";
    nick.textContent = f.nick;
    div.appendChild(nick);
    div.appendChild(document.createTextNode((f.type === "error" ? "error: " : "") + f.text));
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.appendChild(div);
    if (atEnd) log.scrollTop = log.scrollHeight;
  }

  function send(obj) {
    if (sock && sock.readyState === WebSocket.OPEN) sock.send(JSON.stringify(obj));
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    sock = new WebSocket(proto + "//" + location.host + "/chat");
    sock.onopen = () => { status.textContent = "connected"; };
    sock.onclose = () => {
      status.textContent = "disconnected";
      text.disabled = say.disabled = true;
      joined = "";
    };
    sock.onmessage = (ev) => {
      let f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      line(f);
      if (f.type === "info" && f.room !== "*" && f.room === pendingRoom) {
        joined = f.room;
        pendingRoom = "";
        text.disabled = say.disabled = false;
        text.placeholder = "message to #" + joined;
        status.textContent = "in #" + joined;
        text.focus();
      }
    };
  }

  let pendingRoom = "";
  $("setup").addEventListener("submit", (e) => {
    e.preventDefault();
    const nick = $("nick").value.trim();
    const room = $("room").value.trim().replace(/^#/, "");
    if (!nick || !room) return;
    send({ type: "nick", nick: nick });
    if (room !== joined) {
      pendingRoom = room;
      send({ type: "join", room: room });
    }
  });
  $("send").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = text.value;
    if (!t.trim()) return;
    send({ type: "say", text: t });
    text.value = "";
  });
  connect();
})();
