// Run upload with a progress bar: the form is sent with XMLHttpRequest so the bytes sent show as
// they go; then the server scores the run, and the page it answers with (the run, or the form with
// its error) replaces this one.
(function () {
  "use strict";
  const form = document.getElementById("run-upload-form");
  if (!form || !window.XMLHttpRequest || !window.FormData) return;
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
    xhr.upload.onload = () => { bar.style.width = "100%"; state.textContent = "uploaded; scoring the run…"; };
    xhr.onload = () => {
      // the answer is the run's page (after the redirect; it carries the one-time import message)
      // or the form with its error: show it as is, under its own address
      if (xhr.responseURL) history.replaceState(null, "", xhr.responseURL);
      document.open(); document.write(xhr.responseText); document.close();
    };
    xhr.onerror = () => { state.textContent = "the upload failed (network)"; box.className = "progress failed"; };
    xhr.send(new FormData(form));
  });
})();
