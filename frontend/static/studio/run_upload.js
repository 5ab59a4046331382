// Run upload with a progress bar: the form is sent with XMLHttpRequest so the bytes sent show as
// they go; the server checks and stores the zip and answers with the runs page (the form with its
// error, or the list of imports with the new job), which replaces this one. Import jobs still
// queued or running are then followed through the API until they end (the row is re-rendered by
// reloading the page, so the result and the error read as the server writes them).
// A module runs once per window: the page written over this one (document.open/write) loads this
// module again, which the browser does not run a second time, so wire() is called for it here.
function wire() {
  // once per written document (a body of its own), whichever comes first: this call or a run of the module
  if (!document.body || document.body.dataset.runUploadWired) return;
  document.body.dataset.runUploadWired = "1";
  const form = document.getElementById("run-upload-form");
  if (form && window.XMLHttpRequest && window.FormData) {
    const box = document.getElementById("upload-progress"), bar = document.getElementById("upload-bar");
    const state = document.getElementById("upload-state");
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      box.hidden = false;
      xhr.upload.onprogress = (e) => {
        if (!e.lengthComputable) return;
        const pct = Math.round(100 * e.loaded / e.total);
        bar.style.width = pct + "%";
        state.textContent = `uploading… ${pct} % (${(e.loaded / 1048576).toFixed(1)} of ${(e.total / 1048576).toFixed(1)} MB)`;
      };
      xhr.upload.onload = () => { bar.style.width = "100%"; state.textContent = "uploaded; checking the zip…"; };
      xhr.onload = () => {
        if (xhr.responseURL) history.replaceState(null, "", xhr.responseURL);
        document.open(); document.write(xhr.responseText); document.close();
        if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire, { once: true });
        else wire();
      };
      xhr.onerror = () => { state.textContent = "the upload failed (network)"; box.className = "progress failed"; };
      xhr.send(new FormData(form));
    });
  }
  const pending = Array.from(document.querySelectorAll("tr.import-job"))
    .filter((tr) => ["queued", "running"].includes(tr.dataset.status) && !tr.dataset.stale);
  pending.forEach((tr) => {
    async function poll() {
      let j;
      try {
        const r = await fetch(`/api/run-imports/${tr.dataset.job}/`, { credentials: "same-origin" });
        if (!r.ok) return;
        j = await r.json();
      } catch (e) { setTimeout(poll, 2000); return; }
      const st = tr.querySelector(".import-status");
      st.textContent = j.status; st.className = `import-status status-${j.status}`;
      tr.querySelector(".progress").className = `progress ${j.status}`;
      tr.querySelector(".import-result").textContent = j.stage;
      tr.dataset.status = j.status;
      if (["queued", "running"].includes(j.status)) setTimeout(poll, 1000);
      else window.location.reload();
    }
    setTimeout(poll, 700);
  });
}
wire();
