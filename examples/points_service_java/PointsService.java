// points-service in Java: adds points for each ORDER_PAID event exactly once and never applies
// an event older than one of its key already applied (docs/consuming.md). The inbox comes from
// `outbox-operator migrate --inbox public.points_inbox`; its _apply function records the event and
// checks its outbox.seq header in the points' transaction; the Kafka offset is committed after it.
import java.nio.charset.StandardCharsets;
import java.sql.*;
import java.time.Duration;
import java.util.*;
import java.util.regex.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;

public class PointsService {
  static String header(ConsumerRecord<String, String> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  // new, duplicate, stale or ignored; IllegalArgumentException for a bad message.
  static String handle(Connection db, String applyFn, String consumer,
      ConsumerRecord<String, String> r) throws SQLException {
    if (!"ORDER_PAID".equals(header(r, "biz_type"))) return "ignored";
    // {"user": "...", "amount": 250}, in any order (a JSON library would do in a real service).
    String id = header(r, "event_id"), seq = header(r, "outbox.seq"), body = r.value() == null ? "" : r.value().strip();
    Matcher user = Pattern.compile("\"user\"\\s*:\\s*\"([^\"\\\\]*)\"").matcher(body);
    Matcher amount = Pattern.compile("\"amount\"\\s*:\\s*(-?\\d+)\\s*[,}]").matcher(body);
    if (!body.startsWith("{") || !body.endsWith("}") || !user.find() || !amount.find() || seq == null || !seq.matches("-?\\d+"))
      throw new IllegalArgumentException("event " + id + ": needs {\"user\":..,\"amount\":..} and outbox.seq");
    try (PreparedStatement apply = db.prepareStatement("SELECT " + applyFn + "(?, ?::uuid, ?, ?)")) {
      apply.setString(1, consumer);
      apply.setString(2, id);
      apply.setString(3, r.key() == null ? "" : r.key());
      apply.setLong(4, Long.parseLong(seq));
      ResultSet rs = apply.executeQuery();
      rs.next();
      String outcome = rs.getString(1);
      if (outcome.equals("new")) {
        try (PreparedStatement add = db.prepareStatement("INSERT INTO user_points (user_id, points) "
            + "VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET points = user_points.points + EXCLUDED.points")) {
          add.setString(1, user.group(1));
          add.setLong(2, Long.parseLong(amount.group(1)) / 10);
          add.executeUpdate();
        }
      }
      db.commit();
      return outcome;
    } catch (SQLException e) {
      db.rollback();
      // Class 22 (data exception): a bad event_id, an empty consumer, refused by _apply.
      if (e.getSQLState() != null && e.getSQLState().startsWith("22"))
        throw new IllegalArgumentException("event " + id + ": " + e.getMessage());
      throw e;
    }
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>(Map.of("--topic", "outbox.ORDER_PAID", "--group",
        "points-service", "--inbox", "public.points_inbox", "--max-messages", "0", "--idle-exit", "0"));
    for (int i = 0; i + 1 < argv.length; i += 2) a.put(argv[i], argv[i + 1]);
    if (!a.get("--inbox").matches("[a-z_][a-z0-9_]*\\.[a-z_][a-z0-9_]*"))
      throw new IllegalArgumentException("--inbox: expected schema.table");
    String[] inbox = a.get("--inbox").split("\\.");
    String applyFn = "\"" + inbox[0] + "\".\"" + inbox[1] + "_apply\"";
    long max = Long.parseLong(a.get("--max-messages")), idleMs = (long) (Double.parseDouble(a.get("--idle-exit")) * 1000);
    Connection db = DriverManager.getConnection(a.get("--dsn"));
    db.setAutoCommit(false);
    // Replicas starting at once would race on CREATE TABLE IF NOT EXISTS (PostgreSQL refuses
    // the second with a duplicate key): one at a time, under a lock held to the commit.
    db.createStatement().execute("SELECT pg_advisory_xact_lock(hashtext('points-service-schema'))");
    db.createStatement().execute("CREATE TABLE IF NOT EXISTS user_points (user_id text PRIMARY KEY, points bigint NOT NULL)");
    db.commit();
    Properties p = new Properties();
    p.put("bootstrap.servers", a.get("--brokers"));
    p.put("group.id", a.get("--group"));
    p.put("auto.offset.reset", "earliest");
    p.put("enable.auto.commit", "false");
    p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    Map<String, Long> counts = new HashMap<>();
    long seen = 0, idleSince = System.currentTimeMillis();
    try (KafkaConsumer<String, String> kafka = new KafkaConsumer<>(p)) {
      kafka.subscribe(List.of(a.get("--topic")));
      while (max == 0 || seen < max) {
        ConsumerRecords<String, String> records = kafka.poll(Duration.ofMillis(500));
        if (records.isEmpty() && idleMs > 0 && System.currentTimeMillis() - idleSince > idleMs) break;
        for (ConsumerRecord<String, String> r : records) {
          seen++;
          idleSince = System.currentTimeMillis();
          try {
            counts.merge(handle(db, applyFn, a.get("--group"), r), 1L, Long::sum);
          } catch (IllegalArgumentException e) { // a poison message: reported, skipped, never retried
            counts.merge("rejected", 1L, Long::sum);
            System.err.println("skipped: " + e.getMessage());
          }
          kafka.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1)));
        }
      }
    }
    System.out.printf("points-service: applied %d, duplicates skipped %d, stale skipped %d, rejected %d%n", counts
        .getOrDefault("new", 0L), counts.getOrDefault("duplicate", 0L), counts.getOrDefault("stale", 0L), counts.getOrDefault("rejected", 0L));
  }
}
