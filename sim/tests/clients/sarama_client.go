// Sarama (Shopify's Go client, a protocol implementation of its own; the
// version Debian packages) against the served cluster. Usage:
//
//	sarama_client BOOTSTRAP TOPIC GROUP RECORDS
//
// Produces RECORDS records with acks=all from an idempotent producer,
// measures how soon a long-polling fetch is woken by a new record, reads
// every partition back, and reads the topic again in a group of two
// members that commit what they read. Ends with one JSON line.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type result struct {
	Acked          int    `json:"acked"`
	ProduceMs      int64  `json:"produce_ms"`
	Partitions     int    `json:"partitions"`
	ReadBack       int    `json:"read_back"`
	WokenAfterMs   int64  `json:"woken_after_ms"`
	GroupRead      int    `json:"group_read"`
	GroupReadTwice int    `json:"group_read_twice"`
	GroupMembers   int    `json:"group_members_with_claims"`
	Committed      int64  `json:"committed"`
	Error          string `json:"error,omitempty"`
}

func config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sarama-check"
	cfg.Version = sarama.V2_1_0_0
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 10
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	// With no retention sarama 1.22 commits at OffsetCommit v1, which
	// Kafka 4 (and this front) no longer serve; with one, at v2.
	cfg.Consumer.Offsets.Retention = 24 * time.Hour
	cfg.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	return cfg
}

// member counts what one group member reads.
type member struct {
	mu      *sync.Mutex
	seen    map[string]int
	claimed *map[int]bool
	id      int
}

func (m member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(s.Claims()) > 0 {
		(*m.claimed)[m.id] = true
	}
	return nil
}

func (m member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.mu.Lock()
		m.seen[fmt.Sprintf("%d/%d", msg.Partition, msg.Offset)]++
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

// readBack reads partition p from its start to its high watermark.
func readBack(consumer sarama.Consumer, topic string, p int32, r *result) error {
	pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("consume %d: %w", p, err)
	}
	defer pc.Close()
	for {
		select {
		case msg := <-pc.Messages():
			r.ReadBack++
			if msg.Offset+1 >= pc.HighWaterMarkOffset() {
				return nil
			}
		case err := <-pc.Errors():
			return fmt.Errorf("read back %d: %w", p, err)
		case <-time.After(10 * time.Second):
			return fmt.Errorf("read back %d: nothing for 10 s", p)
		}
	}
}

func run(brokers []string, topic, group string, n int, r *result) error {
	cfg := config()
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	started := time.Now()
	for i := 0; i < n; i++ {
		msg := &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(strconv.Itoa(i)),
			Value: sarama.StringEncoder(fmt.Sprintf("record-%d", i)),
		}
		if _, _, err := producer.SendMessage(msg); err != nil {
			return fmt.Errorf("produce %d: %w", i, err)
		}
		r.Acked++
	}
	r.ProduceMs = time.Since(started).Milliseconds()

	consumer, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer consumer.Close()
	parts, err := consumer.Partitions(topic)
	if err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	r.Partitions = len(parts)
	for _, p := range parts {
		if err := readBack(consumer, topic, p, r); err != nil {
			return err
		}
	}

	// A fetch that waits up to 5 s for one byte: parked in the fetch
	// purgatory, it must be answered when the record arrives, not at 5 s.
	wait := config()
	wait.Consumer.MaxWaitTime = 5 * time.Second
	wait.Consumer.Fetch.Min = 1
	waiting, err := sarama.NewConsumer(brokers, wait)
	if err != nil {
		return fmt.Errorf("waiting consumer: %w", err)
	}
	defer waiting.Close()
	pc, err := waiting.ConsumePartition(topic, parts[0], sarama.OffsetNewest)
	if err != nil {
		return fmt.Errorf("waiting consume: %w", err)
	}
	manual := config()
	manual.Producer.Partitioner = sarama.NewManualPartitioner
	waker, err := sarama.NewSyncProducer(brokers, manual)
	if err != nil {
		return fmt.Errorf("waking producer: %w", err)
	}
	time.Sleep(500 * time.Millisecond) // its first fetch is parked by now
	sent := time.Now()
	if _, _, err := waker.SendMessage(&sarama.ProducerMessage{
		Topic: topic, Partition: parts[0], Value: sarama.StringEncoder("wake"),
	}); err != nil {
		return fmt.Errorf("produce wake: %w", err)
	}
	select {
	case <-pc.Messages():
		r.WokenAfterMs = time.Since(sent).Milliseconds()
	case err := <-pc.Errors():
		return fmt.Errorf("waiting fetch: %w", err)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("waiting fetch: not woken in 10 s")
	}
	pc.Close()
	waker.Close()
	producer.Close()

	var mu sync.Mutex
	seen := map[string]int{}
	claimed := map[int]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	var members sync.WaitGroup
	var groups []sarama.ConsumerGroup
	for id := 0; id < 2; id++ {
		g, err := sarama.NewConsumerGroup(brokers, group, config())
		if err != nil {
			cancel()
			return fmt.Errorf("group member %d: %w", id, err)
		}
		groups = append(groups, g)
		members.Add(1)
		go func(id int, g sarama.ConsumerGroup) {
			defer members.Done()
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{topic}, member{&mu, seen, &claimed, id}); err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}(id, g)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := len(seen) >= n+1 && len(claimed) == 2
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // two commit intervals
	cancel()
	for _, g := range groups {
		g.Close()
	}
	members.Wait()
	mu.Lock()
	r.GroupRead = len(seen)
	for _, times := range seen {
		if times > 1 {
			r.GroupReadTwice++
		}
	}
	r.GroupMembers = len(claimed)
	mu.Unlock()

	client, err := sarama.NewClient(brokers, config())
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer client.Close()
	offsets, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		return fmt.Errorf("offset manager: %w", err)
	}
	defer offsets.Close()
	for _, p := range parts {
		pom, err := offsets.ManagePartition(topic, p)
		if err != nil {
			return fmt.Errorf("committed %d: %w", p, err)
		}
		next, _ := pom.NextOffset()
		if next > 0 {
			r.Committed += next
		}
		pom.Close()
	}
	return nil
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: sarama_client BOOTSTRAP TOPIC GROUP RECORDS")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, "RECORDS:", err)
		os.Exit(2)
	}
	var r result
	if err := run([]string{os.Args[1]}, os.Args[2], os.Args[3], n, &r); err != nil {
		r.Error = err.Error()
	}
	line, _ := json.Marshal(r)
	fmt.Println(string(line))
}
