// wo chat: the browser side of the JSON protocol in docs/chat.md.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const log = $("log"), status = $("status"), text = $("text"), say = $("say");
  let sock = null;
  let nick = "";        // the nick asked for, sent again after a reconnect
  let joined = "";      // the room we are in (kept across a reconnect: it is rejoined)
  let pendingRoom = ""; // a join sent, not yet answered
  let resuming = "";    // the room rejoined after a reconnect, until the server says we are in
  let quitting = false; // /quit: do not reconnect
  let attempt = 0;      // reconnects since the last open connection
  const lastSeq = {};   // room -> the highest message seq shown
  let wanted = "";      // a room to join once (re)connected with a new token
  let opened = false;   // a connection has opened since the last token change
  let retry = 0;        // the pending reconnect's timer

  // The token (auth.token_file) lives in sessionStorage: this tab only, gone
  // when it closes, never in the URL (which lands in logs and history). It
  // goes to the server as a WebSocket subprotocol, the one header a browser
  // lets a page set on the upgrade: "wo.bearer." + base64url (subprotocols
  // allow no "/", "+" or "="), beside "wo.chat", the one the server selects.
  const tokenKey = "wo.token";
  function storedToken() {
    try { return sessionStorage.getItem(tokenKey) || ""; } catch (e) { return ""; }
  }
  function storeToken(t) {
    try {
      if (t) sessionStorage.setItem(tokenKey, t); else sessionStorage.removeItem(tokenKey);
    } catch (e) { /* storage off: the token lasts this page */ }
    memToken = t;
  }
  let memToken = storedToken();
  function protocols() {
    const p = ["wo.chat"];
    if (memToken) {
      const bytes = new TextEncoder().encode(memToken);
      let bin = "";
      for (const b of bytes) bin += String.fromCharCode(b);
      p.push("wo.bearer." + btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""));
    }
    return p;
  }

  function line(f) {
    const div = document.createElement("div");
    div.className = "line " + (f.type === "message" ? (f.history ? "history" : "message") : f.type);
    if (f.seq) div.dataset.seq = f.seq;
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
    const who = document.createElement("span");
    who.className = "nick";
    who.textContent = f.nick;
    div.appendChild(who);
    div.appendChild(document.createTextNode((f.type === "error" ? "error: " : "") + f.text));
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.appendChild(div);
    if (atEnd) log.scrollTop = log.scrollHeight;
  }

  // note shows a line the page itself says (not from the server).
  function note(type, t) {
    line({ type: type, room: joined || "*", nick: "*page*", text: t });
  }

  function send(obj) {
    if (sock && sock.readyState === WebSocket.OPEN) {
      sock.send(JSON.stringify(obj));
      return true;
    }
    note("error", "not connected; try again once reconnected");
    return false;
  }

  // join asks for room; after a reconnect (resume) it asks only for what
  // was missed: the messages after the last one shown.
  function join(room, resume) {
    if (!room || room === joined) return;
    const msg = { type: "join", room: room };
    if (resume && lastSeq[room]) {
      msg.since = lastSeq[room];
      resuming = room;
    }
    pendingRoom = room;
    send(msg);
  }

  // delay is the next reconnect's wait: exponential from 250 ms, capped at
  // 10 s, with full jitter over its upper half so that pages cut off by one
  // restart do not all come back at once.
  function delay() {
    const base = Math.min(10000, 250 * Math.pow(2, attempt));
    attempt++;
    return base / 2 + Math.random() * base / 2;
  }

  function connect() {
    clearTimeout(retry); // a connect made now replaces a pending reconnect
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const s = new WebSocket(proto + "//" + location.host + "/chat", protocols());
    sock = s;
    s.onopen = () => {
      attempt = 0;
      opened = true;
      status.textContent = "connected";
      if (nick) send({ type: "nick", nick: nick });
      if (joined) {
        const room = joined;
        joined = "";
        join(room, true);
      } else if (wanted) {
        join(wanted, false);
      }
      wanted = "";
    };
    s.onclose = () => {
      if (sock !== s) return;
      text.disabled = say.disabled = true;
      pendingRoom = "";
      if (quitting) {
        status.textContent = "disconnected";
        return;
      }
      const wait = delay();
      // A server that wants a token refuses the upgrade (401), which a
      // page cannot see: say what may be missing.
      const hint = opened ? "" : memToken ? " (is the token right?)" : " (does the server want a token?)";
      status.textContent = "disconnected" + hint + "; reconnecting in " + (wait / 1000).toFixed(1) + " s";
      retry = setTimeout(connect, wait);
    };
    s.onmessage = (ev) => {
      if (sock !== s) return; // a socket replaced (a new token) says nothing more
      let f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f.type === "message" && f.seq) {
        const last = lastSeq[f.room] || 0;
        // A replay after a reconnect never repeats what is on the page.
        if (f.history && resuming === f.room && f.seq <= last) return;
        if (f.seq > last) lastSeq[f.room] = f.seq;
      }
      line(f);
      if (f.type === "info" && f.room !== "*" && f.room === pendingRoom) {
        joined = f.room;
        pendingRoom = resuming = "";
        text.disabled = say.disabled = false;
        text.placeholder = "message to #" + joined + " (or /rooms, /history [N], /join ROOM, /nick NAME, /leave, /quit)";
        status.textContent = "in #" + joined;
        text.focus();
      }
      if (f.type === "info" && f.room === joined && f.text === "you left #" + joined) {
        joined = "";
        text.disabled = say.disabled = true;
        text.placeholder = "join a room to talk";
        status.textContent = "connected";
      }
    };
  }

  // command handles a line typed in the message box that starts with "/",
  // as the TCP protocol does: commands become their frames, "//text" is a
  // message starting with a slash. Nothing typed as a command is ever sent
  // as chat text.
  function command(t) {
    if (t.startsWith("//")) return send({ type: "say", text: t.slice(1) });
    const m = /^\/(\S*)\s*(.*)$/.exec(t.trim());
    const name = m[1].toLowerCase(), arg = m[2].trim();
    switch (name) {
      case "rooms": case "list":
        return send({ type: "rooms" });
      case "history": {
        if (!arg) return send({ type: "history" });
        const since = /^since\s+(\d+)$/.exec(arg);
        if (since) return send({ type: "history", since: Number(since[1]) });
        if (/^\d+$/.test(arg)) return send({ type: "history", n: Number(arg) });
        return note("error", "/history takes a count (/history 50) or /history since SEQ");
      }
      case "nick":
        if (!arg) return note("error", "/nick needs a name");
        nick = arg;
        $("nick").value = arg;
        return send({ type: "nick", nick: arg });
      case "join":
        if (!arg) return note("error", "/join needs a room name");
        $("room").value = arg.replace(/^#/, "");
        return join(arg.replace(/^#/, ""), false);
      case "leave": case "part":
        return send({ type: "leave" });
      case "quit":
        quitting = true;
        return send({ type: "quit" });
    }
    return note("error", "unknown command /" + name + " (known: /nick NAME, /join ROOM, /leave, /rooms, /history [N], /quit; //text sends a message starting with /)");
  }

  $("setup").addEventListener("submit", (e) => {
    e.preventDefault();
    const n = $("nick").value.trim();
    const room = $("room").value.trim().replace(/^#/, "");
    if (!n || !room) return;
    nick = n;
    const tok = $("token").value.trim();
    if (tok !== memToken) {
      // A new token needs a new connection: the upgrade is where it goes.
      storeToken(tok);
      wanted = room;
      opened = false;
      attempt = 0;
      const old = sock;
      sock = null; // its close must not schedule a reconnect
      if (old) old.close();
      connect();
      return;
    }
    send({ type: "nick", nick: n });
    join(room, false);
  });
  $("send").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = text.value;
    if (!t.trim()) return;
    if (t.startsWith("/")) command(t);
    else send({ type: "say", text: t });
    text.value = "";
  });
  $("token").value = memToken;
  connect();
})();
