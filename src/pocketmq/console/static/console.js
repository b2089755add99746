// PocketMQ console: forms of class "api-form" are sent to the JSON API as a JSON object of their fields
// (empty fields left out, digits sent as numbers), after a confirmation when the form asks for one; the
// answer (or the error) is shown in the form's <output>, and the page's live blocks are reloaded.
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!form.classList.contains("api-form")) return;
  event.preventDefault();
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
  const body = {};
  for (const [name, value] of new FormData(form).entries()) {
    if (value === "") continue;
    body[name] = /^-?\d+$/.test(value) && name !== "time" && name !== "value" ? Number(value) : value;
  }
  const method = form.dataset.method;
  const output = form.querySelector("output");
  const response = await fetch(form.dataset.url, {
    method,
    headers: { "Content-Type": "application/json" },
    body: method === "DELETE" ? undefined : JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  output.dataset.status = String(response.status);
  output.textContent = response.ok ? "done: " + JSON.stringify(answer) : "error: " + (answer.error ? answer.error.message : response.statusText);
  document.querySelectorAll("[hx-get]").forEach((el) => window.htmx && window.htmx.trigger(el, "load"));
});
// A live block whose request was refused or failed says so, with the status (htmx would leave it as it was).
document.addEventListener("htmx:responseError", (event) => {
  const xhr = event.detail.xhr;
  const said = document.createElement("p");
  said.className = "refused";
  said.dataset.status = String(xhr.status);
  said.textContent = "error " + xhr.status + ": " + (xhr.responseText || xhr.statusText);
  event.detail.target.replaceChildren(said);
});
