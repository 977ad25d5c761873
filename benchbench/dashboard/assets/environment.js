/* Environment: the fingerprint (comparability fields), info and measured ceilings
 * of one environment, or the key-by-key diff of two. */
"use strict";
(function () {
  const BB = window.BB, el = BB.el;
  const PARTS = [["fields", "Fingerprint (comparability fields: a change starts a new history)"],
    ["info", "Info (recorded, never splits history)"], ["profile", "Measured ceilings"]];

  function picker(name, envs, current) {
    const sel = el("select", { name, on: { change: (ev) => BB.setState({ [name]: ev.target.value }) } },
      name === "env2" ? el("option", { value: "" }, "— (no diff)") : null);
    for (const e of envs) sel.appendChild(el("option", { value: e.id, selected: e.id === current ? "selected" : null }, e.machine + " (" + e.id.slice(0, 12) + ")"));
    return el("label", { class: "picker" }, name === "env" ? "environment " : "diff against ", sel);
  }

  BB.start({
    filters: [],
    async render(main, st) {
      const envs = await BB.load("environments");
      const a = envs.find((e) => e.id === st.env) || envs[0];
      const b = envs.find((e) => e.id === st.env2 && e.id !== a.id);
      main.appendChild(el("div", { class: "pickers" }, picker("env", envs, a.id), picker("env2", envs, b && b.id)));
      const runs = BB.index().runs.filter((r) => BB.index().envs[r.env] && BB.index().envs[r.env].id === a.id);
      main.appendChild(el("h1", {}, a.machine || a.id));
      main.appendChild(el("p", {}, "id ", el("code", {}, a.id), " · " + runs.length + " runs" +
        (runs.length ? ", latest " + BB.date(runs[runs.length - 1].t) : "")));
      for (const [part, title] of PARTS) {
        const keys = [...new Set([...Object.keys(a[part]), ...Object.keys(b ? b[part] : {})])].sort();
        if (!keys.length) { main.appendChild(BB.section(title, el("p", { class: "muted" }, "nothing recorded"))); continue; }
        const rows = keys.map((k) => {
          const va = a[part][k], vb = b ? b[part][k] : undefined;
          const differs = b && va !== vb;
          const cells = [k, va === undefined ? "(absent)" : va];
          if (b) cells.push(vb === undefined ? "(absent)" : vb);
          return { cls: differs ? "differs" : "", cells };
        });
        const diffs = rows.filter((r) => r.cls).length;
        main.appendChild(BB.section(title + (b ? " · " + diffs + " differ" : ""),
          BB.table(b ? ["key", a.machine || "base", b.machine || "head"] : ["key", "value"], rows, "kv")));
      }
      window.BB_READY = performance.now();
    },
  });
})();
