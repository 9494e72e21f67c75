// Chime's service worker (docs/push.md): each push is a delivery of PROTOCOL.md section 5, the
// same JSON an MQTT subscriber gets. It shows the notification, tagged with its fireId so that the
// same delivery pushed twice (a retry, or after a restart) replaces itself instead of showing twice.
self.addEventListener("push", event => {
  const delivery = event.data ? event.data.json() : {};
  const title = delivery.alertTitle || "Reminder";
  event.waitUntil(self.registration.showNotification(title, {
    body: delivery.alertBody || "",
    tag: delivery.fireId,
    data: delivery,
  }));
});

self.addEventListener("notificationclick", event => {
  event.notification.close();
  // The app's page: it can `ack` the delivery (event.notification.data.fireId) with receipts on.
  event.waitUntil(self.clients.openWindow("./"));
});
